"""Ops of LLM-serving engines (SGLang, vLLM, aiter) as torch.profiler records them, laid out as the
engines call them (argument positions from their traces: TraceLens's SGLang and vLLM test traces).

- ``act_and_mul(out, input)`` (``sgl_kernel::silu_and_mul``, ``_C::silu_and_mul``, gelu variants;
  ``_C::silu_and_mul_quant(out, input, scale)`` writes fp8 and reads its scale):
  out = act(input[..., :d]) · input[..., d:]; the input [.., 2d] read once, out [.., d] written once;
  5 FLOPs per output element (the activation ~4, the product 1).
- ``sglang::store_cache(k, v, k_cache, v_cache, indices, row_bytes, num_split)``: each new token's key
  and value written to its cache row (in the cache's element type); k, v and the indices read; the
  cache itself is not read.
- Paged / unified attention (``sglang_profiler::attention_paged_attention_ragged``,
  ``aiter::paged_attention_ragged``, ``aiter::mha_batch_prefill``, FlashInfer's ``..._paged_run``,
  ``vllm::unified_attention[_with_output]``, ``_C::paged_attention_v1/v2``): 2·Hq·pairs·(D + Dv) FLOPs;
  bytes = q + the K keys' K and V rows (cache element type) + kv_indptr / seq_lens + out. K comes from
  the recorded ``kv_indptr`` / ``seq_lens`` values when the trace holds them; Kineto records none (they
  are tensors), and the row then says so in ``cost_note``: K is the lower bound of one key per query
  token (a token attends at least to its own key; for ops recording max_seq_len, the longest request's
  keys + one per other request), the pairs the causal minimum for the batch. The engines' step
  annotations carry the batch's key total (vLLM's ``..._generation_32(sq32sk32785...)``); a caller that
  reads them passes it as ``OpCall.kv_keys`` (``engine_keys``: the cost and fusion stages, per step),
  and the row says it came from there.
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, canonical_op, register
from tracekit.ops.tensors import OpCall, Tensor, need

# ---- activation and multiply ------------------------------------------------------------------


def _act_and_mul_io(call: OpCall) -> IO:
    out, x = need(call.tensor(0), "out"), need(call.tensor(1), "input")
    if x.shape[-1] != 2 * out.shape[-1]:
        raise ValueError("input's last dim is not twice out's")
    scale = call.tensor(2) if call.name.endswith("_quant") else None      # silu_and_mul_quant's fp8 scale
    return IO((x, *([scale] if scale is not None else [])), (out,))


def _act_fused(call: OpCall) -> list[str]:
    """silu_and_mul → silu, mul; mul_and_silu → silu, mul; gelu_tanh_and_mul → gelu_tanh, mul."""
    base = call.name.split("::")[-1].removesuffix("_quant")
    act = base.replace("_and_mul", "").replace("mul_and_", "")
    return [act, "mul"]


register(OpFamily("act_and_mul", ("sgl_kernel::silu_and_mul", "sgl_kernel::gelu_and_mul",
                                  "sgl_kernel::gelu_tanh_and_mul", "_C::silu_and_mul", "_C::gelu_and_mul",
                                  "_C::gelu_tanh_and_mul", "_C::mul_and_silu", "_C::silu_and_mul_quant"),
                  "elementwise",
                  _act_and_mul_io, lambda call, io: 5.0 * io.writes[0].numel,
                  fused=_act_fused,
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

# ---- paged / unified attention -----------------------------------------------------------------

# op name -> (q, k_cache or new key, v_cache or new value, out, kv_indptr or seq_lens, kind)
# kind: "indptr" (kv_indptr [B+1] over pages, kv_last_page_len two places on), "seq_lens" ([B]),
#       "new" (the op gets this step's new keys only: no KV length, no request count recorded)
_PAGED = {
    # aiter::paged_attention_ragged as SGLang's profiler records it: out, workspace, q, k_cache, v_cache,
    # kv_indptr, kv_page_indices, kv_last_page_lens, ... (caches [pages, page_size, Hkv, D])
    "sglang_profiler::attention_paged_attention_ragged": (2, 3, 4, 0, 5, "indptr"),
    # out, workspace, query, key_cache, value_cache, scale, kv_indptr, kv_page_indices, kv_last_page_lens, ...
    "aiter::paged_attention_ragged": (2, 3, 4, 0, 6, "indptr"),
    # FlashInfer's batch prefill/decode paged_run (op "flashinfer::<module uri>_paged_run"): float and int
    # workspaces, plan_info, q, paged_k_cache, paged_v_cache, qo_indptr, paged_kv_indptr, paged_kv_indices,
    # paged_kv_last_page_len, o, maybe_lse, mask_mode, layout (0 NHD, 1 HND), ...
    "flashinfer::paged_run": (3, 4, 5, 10, 7, "indptr"),
    # aiter's paged prefill: q [T, Hq, D], k_cache, v_cache [pages of 1 token, Hkv, D], cu_seqlens_q,
    # kv_indptr, kv_page_indices, max_seqlen_q, max_seqlen_k, ... (returns out shaped like q)
    "aiter::mha_batch_prefill": (0, 1, 2, None, 4, "indptr"),
    "sglang_profiler::mha__mha_batch_prefill": (0, 1, 2, None, 4, "indptr"),
    # vLLM: query [T, Hq, D], key, value [T, Hkv, D] (this step's), output [T, Hq, D]
    "vllm::unified_attention_with_output": (0, 1, 2, 3, None, "new"),
    "vllm::unified_attention": (0, 1, 2, None, None, "new"),
    # out, query [B, Hq, D], key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, ...
    "_C::paged_attention_v1": (1, 2, 3, 0, 7, "seq_lens"),
    # out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
    # seq_lens, ...
    "_C::paged_attention_v2": (4, 5, 6, 0, 10, "seq_lens"),
}


# the position of a recorded integer max KV length per request (an int argument: its value is recorded)
_MAX_KV_AT = {"_C::paged_attention_v1": 9, "_C::paged_attention_v2": 12, "aiter::mha_batch_prefill": 7}


def _layout(call: OpCall):
    return _PAGED[canonical_op(call.name)]


def _cache_dims(call: OpCall, cache: Tensor) -> tuple[int, int, int]:
    """(page size, KV heads, head dim) of a paged cache, or (1, heads, dim) of new keys [T, Hkv, D]."""
    name = canonical_op(call.name)
    if name.startswith("_C::paged_attention"):       # value_cache [blocks, Hkv, D, block]; key [.., D/x, block, x]
        return cache.shape[-1] if len(cache.shape) == 4 else cache.shape[3], cache.shape[1], \
            cache.shape[2] if len(cache.shape) == 4 else cache.shape[2] * cache.shape[4]
    if len(cache.shape) == 4:
        if name == "flashinfer::paged_run" and call.value(13) == 1:       # HND: [pages, Hkv, page, D]
            return cache.shape[2], cache.shape[1], cache.shape[3]
        return cache.shape[1], cache.shape[2], cache.shape[3]             # NHD: [pages, page, Hkv, D]
    return 1, cache.shape[-2], cache.shape[-1]


def query_tokens(call: OpCall) -> int | None:
    """The query tokens of a paged attention call (its query's first dim), or None without shapes."""
    q = call.tensor(_layout(call)[0]) if canonical_op(call.name) in _PAGED else None
    return q.shape[0] if q is not None and q.shape else None


def engine_keys(call: OpCall, engine) -> int | None:
    """The keys the engine's step annotation gives this call (``engine``: ``load.engine_steps.EngineStep``,
    its ``keys_for``), or None: not paged attention, no annotation, or no key count in it."""
    if engine is None or canonical_op(call.name) not in _PAGED:
        return None
    tokens = query_tokens(call)
    if _layout(call)[5] == "new" and not engine.decode_requests == tokens == engine.decode_tokens:
        return None     # no request count in the call: its pairs are the keys for decode tokens only
    return engine.keys_for(tokens) if tokens else None


def kv_tokens(call: OpCall) -> tuple[int, int, str | None]:
    """(keys read per KV head over the batch, requests, where the keys come from: "recorded" (the
    kv_indptr / seq_lens values), "the engine's step annotation" (``OpCall.kv_keys``), None: a bound).
    Not recorded (the usual case: kv_indptr and seq_lens are tensors, their values not in the trace):
    one key per query token, a lower bound (a query attends at least to its own token's key)."""
    qi, ki, _, _, lens_at, kind = _layout(call)
    q = need(call.tensor(qi), "query")
    counts = call.tensor(lens_at) if lens_at is not None else None
    requests = (counts.shape[0] - (kind == "indptr")) if counts is not None and counts.shape else q.shape[0]
    lens = call.value(lens_at) if lens_at is not None else None
    if isinstance(lens, list) and lens and all(isinstance(x, int) for x in lens):
        if kind == "seq_lens":
            return sum(lens), requests, "recorded"
        page = _cache_dims(call, need(call.tensor(ki), "k_cache"))[0]
        last = call.value(lens_at + 2)
        if page == 1:
            return lens[-1], requests, "recorded"
        if isinstance(last, list) and len(last) >= requests:
            return (lens[-1] - requests) * page + sum(last[:requests]), requests, "recorded"
    if isinstance(call.kv_keys, int) and call.kv_keys >= q.shape[0]:
        return call.kv_keys, max(requests, 1), "the engine's step annotation"
    return _keys_bound(call, q.shape[0], max(requests, 1)), max(requests, 1), None


def _keys_bound(call: OpCall, tokens: int, requests: int) -> int:
    """The fewest keys the batch can read: one per query token, and, where the call records the longest
    request's KV length (max_seq_len), that many for one request and at least one for each other."""
    at = _MAX_KV_AT.get(canonical_op(call.name))
    longest = call.value(at) if at is not None else None
    if isinstance(longest, int) and not isinstance(longest, bool) and longest > 0:
        return max(tokens, longest + requests - 1)
    return tokens


def _paged_io(call: OpCall) -> IO:
    qi, ki, vi, oi, lens_at, _ = _layout(call)
    q, k, v = need(call.tensor(qi), "query"), need(call.tensor(ki), "key"), need(call.tensor(vi), "value")
    out = call.tensor(oi) if oi is not None else None
    out = out if out is not None else q
    tokens, _, _ = kv_tokens(call)
    _, hk, dk = _cache_dims(call, k)
    _, hv, dv = _cache_dims(call, v)
    lens = call.tensor(lens_at) if lens_at is not None else None
    reads = (q, Tensor((tokens, hk, dk), k.dtype, k.itemsize), Tensor((tokens, hv, dv), v.dtype, v.itemsize))
    return IO(reads + ((lens,) if lens is not None else ()), (Tensor(out.shape, out.dtype, out.itemsize),))


def pairs_per_head(t: int, keys: int, requests: int) -> float:
    """(query, key) pairs per query head. Decode (one query token per request): every key once (all the
    keys when recorded, the bound's when not). Otherwise the fewest a causal batch of T tokens in B
    requests can have: each request's q_i tokens see at least the q_i(q_i+1)/2 pairs among themselves,
    least when the requests are equal: (T²/B + T)/2."""
    if t == requests:
        return float(keys)
    return (t * t / requests + t) / 2.0


def _paged_flops(call: OpCall, io: IO) -> float:
    """Q·Kᵀ and P·V: 2·Hq·pairs·(D + Dv)."""
    q, v_rows = io.reads[0], io.reads[2]
    t, hq, d = q.shape[0], q.shape[-2] if len(q.shape) == 3 else 1, q.shape[-1]
    keys, requests, _ = kv_tokens(call)
    return 2.0 * hq * pairs_per_head(t, keys, requests) * (d + v_rows.shape[-1])


def _paged_note(call: OpCall) -> str:
    base = "paged attention: 2·Hq·pairs·(D + Dv), q + K keys' K and V rows + out"
    try:
        keys, requests, source = kv_tokens(call)
        t = need(call.tensor(_layout(call)[0]), "query").shape[0]
    except (ValueError, IndexError, TypeError, KeyError, AttributeError):
        return base
    pairs = "" if t == requests else f"; pairs assumed = the causal minimum for {t} query tokens in " \
                                                 f"{requests} requests"
    if source:
        return f"{base}; K = {keys} keys ({source}){pairs}"
    why = "one per query token" if keys == t else "the longest request's recorded max length + 1 per other request"
    return f"{base}; KV lengths not recorded: K assumed = {keys} keys ({why}), a lower bound{pairs}"


register(OpFamily("paged_attention", tuple(_PAGED), "attention", _paged_io, _paged_flops, unit="matrix",
                  dtype=lambda call, io: io.reads[0].dtype, fused=("mm", "softmax", "mm"), model=_paged_note))
