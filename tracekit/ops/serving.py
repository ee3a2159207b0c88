"""Ops of LLM-serving engines (SGLang, vLLM, aiter) as torch.profiler records them, laid out as the
engines call them (argument positions from their traces: TraceLens's SGLang and vLLM test traces).

- ``act_and_mul(out, input)`` (``sgl_kernel::silu_and_mul``, ``_C::silu_and_mul``, gelu variants):
  out = act(input[..., :d]) · input[..., d:]; the input [.., 2d] read once, out [.., d] written once;
  5 FLOPs per output element (the activation ~4, the product 1).
- ``sglang::store_cache(k, v, k_cache, v_cache, indices, row_bytes, num_split)``: each new token's key
  and value written to its cache row (in the cache's element type); k, v and the indices read; the
  cache itself is not read.
- Paged / unified decode attention (``sglang_profiler::attention_paged_attention_ragged``,
  ``aiter::paged_attention_ragged``, ``vllm::unified_attention[_with_output]``, ``_C::paged_attention_v1/v2``):
  4·T·Hq·K·D FLOPs over the K keys each query token sees; bytes = q + the K keys' K and V rows (cache
  element type) + out. K comes from the recorded ``kv_indptr`` / ``seq_lens`` values when the trace
  holds them; these traces do not (the arguments are tensors, their values not recorded), and the row
  then says so: its K is the lower bound of one key per query token (each decode token attends at least
  to its own key), labelled in ``cost_note``.
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, register, site_free
from tracekit.ops.tensors import OpCall, Tensor, need

# ---- activation and multiply ------------------------------------------------------------------


def _act_and_mul_io(call: OpCall) -> IO:
    out, x = need(call.tensor(0), "out"), need(call.tensor(1), "input")
    if x.shape[-1] != 2 * out.shape[-1]:
        raise ValueError("input's last dim is not twice out's")
    return IO((x,), (out,))


register(OpFamily("act_and_mul", ("sgl_kernel::silu_and_mul", "sgl_kernel::gelu_and_mul",
                                  "sgl_kernel::gelu_tanh_and_mul", "_C::silu_and_mul", "_C::gelu_and_mul",
                                  "_C::gelu_tanh_and_mul", "_C::mul_and_silu"), "elementwise",
                  _act_and_mul_io, lambda call, io: 5.0 * io.writes[0].numel,
                  fused=lambda call: [call.name.split("::")[-1].split("_and_")[0].replace("mul", "silu"), "mul"],
                  model="act_and_mul: input [.., 2d] read once, out [.., d] written once, 5 FLOPs/out element"))

# ---- KV-cache store ---------------------------------------------------------------------------


def _store_cache_io(call: OpCall) -> IO:
    k, v = need(call.tensor(0), "k"), need(call.tensor(1), "v")
    k_cache, v_cache = need(call.tensor(2), "k_cache"), need(call.tensor(3), "v_cache")
    indices = need(call.tensor(4), "indices")
    writes = (Tensor(k.shape, k_cache.dtype, k_cache.itemsize), Tensor(v.shape, v_cache.dtype, v_cache.itemsize))
    return IO((k, v, indices), writes)


register(OpFamily("sglang_store_cache", ("sglang::store_cache",), "elementwise", _store_cache_io,
                  model="SGLang store_cache: new k, v and their row indices read + their cache rows written "
                        "(cache element type; the cache is not read)"))

# ---- paged / unified decode attention ---------------------------------------------------------

# op name -> (q, k_cache or new key, v_cache or new value, out, kv_indptr or seq_lens, kind)
# kind: "indptr" (kv_indptr [B+1]: K = its last value · page size), "seq_lens" ([B]: K = their sum),
#       "new" (the op gets this step's new keys only: no KV length recorded)
_PAGED = {
    # aiter::paged_attention_ragged as SGLang's profiler records it: out, workspace, q, k_cache, v_cache,
    # kv_indptr, kv_page_indices, kv_last_page_lens, ... (caches [pages, page_size, Hkv, D])
    "sglang_profiler::attention_paged_attention_ragged": (2, 3, 4, 0, 5, "indptr"),
    "aiter::paged_attention_ragged": (2, 3, 4, 0, 6, "indptr"),
    # vLLM: query [T, Hq, D], key, value [T, Hkv, D] (this step's), output [T, Hq, D]
    "vllm::unified_attention_with_output": (0, 1, 2, 3, None, "new"),
    "vllm::unified_attention": (0, 1, 2, None, None, "new"),
    # out, query [B, Hq, D], key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, ...
    "_C::paged_attention_v1": (1, 2, 3, 0, 7, "seq_lens"),
    # out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
    # seq_lens, ...
    "_C::paged_attention_v2": (4, 5, 6, 0, 10, "seq_lens"),
}


def _kv_heads_dim(cache: Tensor, q: Tensor, name: str) -> tuple[int, int]:
    """(KV heads, value head dim) of a cache or new-key tensor."""
    if name.startswith("_C::paged_attention"):       # value_cache [blocks, Hkv, D, block_size]
        return cache.shape[1], cache.shape[2]
    return cache.shape[-2], cache.shape[-1]          # [..., Hkv, D]


def kv_tokens(call: OpCall) -> tuple[int, bool]:
    """Keys read per KV head (summed over the batch's requests) and whether the trace recorded them;
    not recorded: one key per query token, a lower bound."""
    qi, ki, _, _, lens_at, kind = _PAGED[site_free(call.name)]
    q = need(call.tensor(qi), "query")
    lens = call.value(lens_at) if lens_at is not None else None
    if isinstance(lens, list) and lens and all(isinstance(x, int) for x in lens):
        if kind == "indptr":
            page = need(call.tensor(ki), "k_cache").shape[1] if len(call.tensor(ki).shape) == 4 else 1
            last = call.value(lens_at + 2)
            if page == 1:
                return lens[-1], True
            if isinstance(last, list) and len(last) >= len(lens) - 1:
                return (lens[-1] - (len(lens) - 1)) * page + sum(last[:len(lens) - 1]), True
        elif kind == "seq_lens":
            return sum(lens), True
    return q.shape[0], False


def _paged_io(call: OpCall) -> IO:
    qi, ki, vi, oi, lens_at, _ = _PAGED[site_free(call.name)]
    q, k, v = need(call.tensor(qi), "query"), need(call.tensor(ki), "key"), need(call.tensor(vi), "value")
    out = call.tensor(oi) if oi is not None else None
    out = out if out is not None else q
    tokens, _ = kv_tokens(call)
    hk, dk = _kv_heads_dim(k, q, call.name)
    hv, dv = _kv_heads_dim(v, q, call.name)
    lens = call.tensor(lens_at) if lens_at is not None else None
    reads = (q, Tensor((tokens, hk, dk), k.dtype, k.itemsize), Tensor((tokens, hv, dv), v.dtype, v.itemsize))
    return IO(reads + ((lens,) if lens is not None else ()), (Tensor(out.shape, out.dtype, out.itemsize),))


def _paged_flops(call: OpCall, io: IO) -> float:
    """Q·Kᵀ and P·V: 2·T·Hq·K·(D + Dv), T query tokens, each attending to K / B keys of its request
    (summed: T·K/B); decode (T = B) gives 2·Hq·K·(D + Dv)."""
    q, k_rows, v_rows = io.reads[0], io.reads[1], io.reads[2]
    qi, _, _, _, lens_at, kind = _PAGED[site_free(call.name)]
    t, hq, d = q.shape[0], q.shape[-2] if len(q.shape) == 3 else 1, q.shape[-1]
    requests = call.tensor(lens_at).shape[0] - (kind == "indptr") if lens_at is not None else t
    pairs_per_head = k_rows.shape[0] * t / max(requests, 1)
    return 2.0 * hq * pairs_per_head * (d + v_rows.shape[-1])


def _paged_note(call: OpCall) -> str:
    base = "paged attention: 4·T·Hq·K·D, q + K keys' K and V rows + out"
    try:
        tokens, known = kv_tokens(call)
    except (ValueError, IndexError, TypeError, KeyError, AttributeError):
        return base
    if known:
        return f"{base}; K = {tokens} keys (recorded)"
    return (f"{base}; KV lengths not recorded: K assumed = {tokens} keys (one per query token), "
            "a lower bound")


register(OpFamily("paged_attention", tuple(_PAGED), "attention", _paged_io, _paged_flops, unit="matrix",
                  dtype=lambda call, io: io.reads[0].dtype, fused=("mm", "softmax", "mm"), model=_paged_note))
