"""Serving engines' GEMMs (aiter, vLLM ROCm, quantised) and fused MoE: 2·M·N·K FLOPs per product;
operands read once at their STORED width (an int4 weight packed eight to an int32 is 0.5 byte per
element, plus its scales and zero points), the result written once.

- ``aiter::gemm_a16w16(A [M,K], B [N,K], bias, otype, ...)`` and ``vllm::rocm_unquantized_gemm(x, weight
  [N,K], bias)``: the weight is stored [N, K] (``linear``'s layout); the result [M, N] in otype (a
  ScalarType number) or A's dtype.
- ROCm skinny GEMMs ``_rocm_C::wvSplitK(weight [N,K], x [M,K], [bias,] cu_count)`` and
  ``_rocm_C::LLMM1(weight, x, rows_per_block)`` (the weight first), and aiter's hipBLASLt entry
  ``aiter::hipb_mm(mat1 [M,K], mat2 [K,N], solution_index, bias, out_dtype, scale_a, scale_b, ...)``.
- fp8 / int8 (w8a8): ``_C::cutlass_scaled_mm(out [M,N], a [M,K], b [K,N], a_scales, b_scales, bias)``
  (``_azp`` adds azp_adj, azp), ``aiter::gemm_a8w8[_CK|_bpreshuffle](XQ [M,K], WQ [N,K], x_scale,
  w_scale, out [M,N], bias, ...)``: FLOPs at the operands' fp8 or int8 tensor-core peak.
- int4 weight-only: ``_C::awq_gemm(x [M,K], qweight [K,N/8] int32, scales [K/G,N], qzeros [K/G,N/8] int32,
  split_k)`` and ``_C::gptq_marlin_gemm(a, c, b_q_weight, ..., workspace, b_q_type, size_m, size_n,
  size_k, ...)``: the weight is dequantised in registers and multiplied at the activation dtype's
  (fp16/bf16) tensor-core peak.
- Fused MoE ``vllm::outplace_fused_experts`` / ``inplace_fused_experts`` (SGLang's too)
  ``(hidden [T,H], w1 [E,2I,H], w2 [E,H,I], topk_weights [T,k], topk_ids [T,k], ...)``: each of the T·k
  (token, expert) pairs runs the gate-up product (2·2I·H) and the down product (2·H·I); bytes = hidden,
  the routing tensors, the weights of the experts touched and the output [T,H]. Which experts the
  tokens pick is data the trace does not hold, so the floor takes the fewest a batch can touch, k (every
  token routed to the same k experts), and ``cost_note`` says so, with the most it can touch,
  min(E, T·k).
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, register
from tracekit.ops.tensors import SCALAR_TYPES, OpCall, Tensor, need


def _out_dtype(call: OpCall, at: int, like: Tensor) -> tuple[str, int]:
    code = call.value(at)
    return SCALAR_TYPES.get(code, (like.dtype, like.itemsize)) if isinstance(code, int) else (like.dtype, like.itemsize)


def _extras(call: OpCall, positions) -> list[Tensor]:
    return [t for t in (call.tensor(i) for i in positions) if t is not None]


def _nk_io(call: OpCall) -> IO:
    """A [M,K] times a weight stored [N,K] (+ bias): aiter gemm_a16w16, vLLM rocm_unquantized_gemm."""
    a, w = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    dtype = _out_dtype(call, 3, a) if call.name.startswith("aiter::") else (a.dtype, a.itemsize)
    return IO((a, w, *_extras(call, [2])), (Tensor(a.shape[:-1] + (w.shape[0],), *dtype),))


def _mnk_flops(m_of, n_of, k_of):
    return lambda call, io: 2.0 * m_of(io) * n_of(io) * k_of(io)


def _rows(t: Tensor) -> int:
    n = 1
    for d in t.shape[:-1]:
        n *= d
    return n


_nk_flops = _mnk_flops(lambda io: _rows(io.reads[0]), lambda io: io.reads[1].shape[0], lambda io: io.reads[0].shape[-1])


def _weight_first_io(call: OpCall) -> IO:
    """ROCm skinny GEMMs: weight [N,K] first, activations [M,K] second, an optional bias [N]."""
    w, x = need(call.tensor(0), "weight"), need(call.tensor(1), "input")
    bias = [t for t in _extras(call, [2]) if t.shape == (w.shape[0],)]
    return IO((x, w, *bias), (Tensor(x.shape[:-1] + (w.shape[0],), x.dtype, x.itemsize),))


def _hipb_io(call: OpCall) -> IO:
    """aiter hipb_mm(mat1 [M,K], mat2 [K,N], solution_index, bias, out_dtype, scale_a, scale_b, scale_out):
    the result in out_dtype (a ScalarType number) or mat1's dtype."""
    a, b = need(call.tensor(0), "mat1"), need(call.tensor(1), "mat2")
    return IO((a, b, *_extras(call, [3, 5, 6, 7])), (Tensor((a.shape[0], b.shape[1]), *_out_dtype(call, 4, a)),))


def _scaled_mm_io(call: OpCall) -> IO:
    """cutlass_scaled_mm(out, a [M,K], b [K,N], a_scales, b_scales, [azp_adj, azp,] bias)."""
    out, a, b = need(call.tensor(0), "out"), need(call.tensor(1), "a"), need(call.tensor(2), "b")
    return IO((a, b, *_extras(call, range(3, 8))), (out,))


def _a8w8_io(call: OpCall) -> IO:
    """aiter gemm_a8w8(XQ [M,K], WQ [N,K], x_scale, w_scale, out [M,N], bias, ...)."""
    a, w = need(call.tensor(0), "XQ"), need(call.tensor(1), "WQ")
    out = call.tensor(4)
    shape = (a.shape[0], w.shape[0])
    out = out if out is not None and out.shape == shape else Tensor(shape, "bf16", 2)
    return IO((a, w, *_extras(call, [2, 3, 5])), (out,))


def _awq_io(call: OpCall) -> IO:
    x, qweight, scales = need(call.tensor(0), "input"), need(call.tensor(1), "qweight"), need(call.tensor(2), "scales")
    return IO((x, qweight, scales, *_extras(call, [3])), (Tensor((_rows(x), scales.shape[1]), x.dtype, x.itemsize),))


def _marlin_sizes(call: OpCall) -> tuple[int, int, int, int]:
    """(M, N, K, position of size_m): the three integers size_m, size_n, size_k the call records, found
    as M = rows of a and K = its columns (the signature gained arguments across vLLM versions)."""
    a = need(call.tensor(0), "a")
    m, k = _rows(a), a.shape[-1]
    for i in range(len(call.concrete or []) - 2):
        if call.value(i) == m and call.value(i + 2) == k and isinstance(call.value(i + 1), int):
            return m, call.value(i + 1), k, i
    raise ValueError("size_m, size_n, size_k not recorded")


def _marlin_io(call: OpCall) -> IO:
    """a, the packed weight, scales, zero points, g_idx, perm read (not c, the optional output buffer at
    position 1 in newer signatures, where older ones have the int32 packed weight, nor the workspace just
    before b_q_type); the result [M, N] written in a's dtype."""
    a = need(call.tensor(0), "a")
    m, n, _, at = _marlin_sizes(call)
    second = call.tensor(1)
    skip = {at - 2} | ({1} if second is None or second.dtype != "int32" else set())
    reads = [t for i, t in ((i, call.tensor(i)) for i in range(1, at)) if t is not None and i not in skip]
    return IO((a, *reads), (Tensor((m, n), a.dtype, a.itemsize),))


def _marlin_flops(call: OpCall, io: IO) -> float:
    m, n, k, _ = _marlin_sizes(call)
    return 2.0 * m * n * k


def _gemm(name: str, ops: tuple[str, ...], io, flops, dtype, model: str) -> None:
    register(OpFamily(name, ops, "gemm", io, flops, unit="matrix", dtype=dtype, fused=("mm",), model=model))


_first = lambda call, io: io.reads[0].dtype      # noqa: E731  (the activation / operand dtype)
_gemm("serving_gemm", ("aiter::gemm_a16w16", "vllm::rocm_unquantized_gemm"), _nk_io, _nk_flops, _first,
      "A [M,K] · W [N,K]: 2MNK, A, W (+ bias) read once, out [M,N] written once")
_gemm("rocm_skinny_gemm", ("_rocm_C::wvSplitK", "_rocm_C::LLMM1"), _weight_first_io, _nk_flops, _first,
      "ROCm skinny GEMM: x [M,K] · W [N,K]: 2MNK, x, W (+ bias) read once, out [M,N] written once")
_gemm("hipb_mm", ("aiter::hipb_mm",), _hipb_io,
      _mnk_flops(lambda io: io.reads[0].shape[0], lambda io: io.reads[1].shape[1], lambda io: io.reads[0].shape[1]),
      _first, "hipb_mm (hipBLASLt): 2MNK at mat1's dtype peak; mat1, mat2 (+ bias, scales) + out in out_dtype")
_gemm("scaled_mm_w8a8", ("_C::cutlass_scaled_mm", "_C::cutlass_scaled_mm_azp"), _scaled_mm_io,
      _mnk_flops(lambda io: io.reads[0].shape[0], lambda io: io.reads[1].shape[1], lambda io: io.reads[0].shape[1]),
      _first, "cutlass_scaled_mm: 2MNK at the fp8/int8 peak; a, b at 1 byte/element + scales (+ bias) + out")
_gemm("gemm_a8w8", ("aiter::gemm_a8w8", "aiter::gemm_a8w8_CK", "aiter::gemm_a8w8_bpreshuffle"), _a8w8_io,
      _mnk_flops(lambda io: io.reads[0].shape[0], lambda io: io.reads[1].shape[0], lambda io: io.reads[0].shape[1]),
      _first, "aiter gemm_a8w8: 2MNK at the fp8/int8 peak; XQ, WQ at 1 byte/element + scales + out")
_gemm("awq_gemm", ("_C::awq_gemm",), _awq_io,
      _mnk_flops(lambda io: _rows(io.reads[0]), lambda io: io.reads[2].shape[1], lambda io: io.reads[0].shape[-1]),
      _first, "awq_gemm: 2MNK at the activation dtype's peak; int4 weight at 0.5 byte/element + scales, "
              "zeros")
_gemm("marlin_gemm", ("_C::gptq_marlin_gemm", "_C::marlin_gemm", "_C::awq_marlin_gemm"), _marlin_io, _marlin_flops,
      _first, "marlin: 2MNK (size_m, size_n, size_k) at the activation dtype's peak; packed int4 weight at its "
              "stored width + scales, zeros")

# ---- fused MoE -------------------------------------------------------------------------------------


def _moe_parts(call: OpCall):
    x, w1, w2 = need(call.tensor(0), "hidden"), need(call.tensor(1), "w1"), need(call.tensor(2), "w2")
    ids = need(call.tensor(4), "topk_ids")
    if len(w1.shape) != 3 or len(w2.shape) != 3:
        raise ValueError("expert weights not [E, N, K]")
    tokens, top_k = _rows(x), ids.shape[-1]
    return x, w1, w2, ids, tokens, top_k, min(top_k, w1.shape[0])


def _moe_io(call: OpCall) -> IO:
    x, w1, w2, ids, _, _, experts = _moe_parts(call)
    touched = [Tensor((experts,) + w.shape[1:], w.dtype, w.itemsize) for w in (w1, w2)]
    routing = _extras(call, [3, 4])
    scales = [t for t in _extras(call, range(5, 16)) if len(t.shape) == 3 and t.shape[0] == w1.shape[0]]
    scales = [Tensor((experts,) + t.shape[1:], t.dtype, t.itemsize) for t in scales]      # per-expert scales
    return IO((x, *touched, *routing, *scales), (Tensor(x.shape, x.dtype, x.itemsize),))


def _moe_flops(call: OpCall, io: IO) -> float:
    x, w1, w2, _, tokens, top_k, _ = _moe_parts(call)
    return 2.0 * tokens * top_k * (w1.shape[1] * w1.shape[2] + w2.shape[1] * w2.shape[2])


def _moe_note(call: OpCall) -> str:
    base = "fused MoE: 2·T·k·(2I·H + H·I); hidden + touched experts' w1, w2 + routing + out"
    try:
        _, w1, _, _, tokens, top_k, experts = _moe_parts(call)
    except (ValueError, IndexError, TypeError):
        return base
    return (f"{base}; experts touched not recorded: assumed k = {experts}, the fewest (a lower bound; at "
            f"most min(E, T·k) = {min(w1.shape[0], tokens * top_k)})")


register(OpFamily("fused_moe", ("vllm::outplace_fused_experts", "vllm::inplace_fused_experts",
                                "sglang::inplace_fused_experts",
                                "sglang::outplace_fused_experts"), "gemm", _moe_io, _moe_flops, unit="matrix",
                  dtype=lambda call, io: io.reads[0].dtype, fused=("mm", "silu", "mul", "mm"), model=_moe_note))
