"""vLLM's custom ops (``_C::``, ``_C_cache_ops::``), as torch.profiler records them in vLLM traces, and
the SGLang (``sgl_kernel::``) and aiter ops of the same families (their argument positions by name).

Signatures are vLLM's (csrc/ops.h, csrc/cache.h): outputs come first where the op takes an ``out``
tensor, and several ops work in place. Minimal bytes follow the same rule as every other record:
what the call must read once and write once.

- ``rms_norm(out, input, weight, eps)``: reads input and weight, writes out.
- ``fused_add_rms_norm(input, residual, weight, eps)``: residual += input, input = norm(residual);
  reads input, residual, weight and writes input and residual back. aiter's ``add_rmsnorm(out, input,
  residual_in, residual_out, weight, eps)`` writes out and residual_out instead: the same bytes.
- ``rms_norm`` also as aiter's ``rmsnorm(out, input, weight, eps)`` and ``rms_norm(input, weight, ...)``
  (returns out) and sgl_kernel's ``rmsnorm(out, input, weight, eps)``; with fp8 quantisation fused in,
  ``rms_norm_static_fp8_quant(result, input, weight, scale, eps)`` and
  ``fused_add_rms_norm_static_fp8_quant(result, input, residual, weight, scale, eps)``: the scale read too,
  the fp8 result written at 1 byte per element (the residual in place).
- ``rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)``: rotates, in place,
  the first ``rot_dim`` (the cache's row width) of each head of query and key; reads the positions
  and one cache row per token.
- ``static_scaled_fp8_quant(out, input, scale)``: reads input and the scale, writes out.
- ``reshape_and_cache[_flash](key, value, key_cache, value_cache, slot_mapping, ...)``: writes each
  token's key and value into its cache slot, in the cache's element type; the cache is not read.
  Padding slots (slot -1, skipped by the kernel) are not recorded, so every token counts.
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, register
from tracekit.ops.tensors import OpCall, Tensor, need


# op name -> positions of (out, input, weight[, scale]); out None: the op returns a tensor like input
_RMS_NORM = {"_C::rms_norm": (0, 1, 2), "sgl_kernel::rmsnorm": (0, 1, 2), "aiter::rmsnorm": (0, 1, 2),
             "aiter::rms_norm": (None, 0, 1), "vllm::rocm_aiter_rms_norm": (None, 0, 1),
             "_C::rms_norm_static_fp8_quant": (0, 1, 2, 3)}
# op name -> positions of (input, residual_in, weight, out, residual_out[, scale]); outputs None: in place
_ADD_RMS_NORM = {"_C::fused_add_rms_norm": (0, 1, 2, None, None),
                 "sgl_kernel::fused_add_rmsnorm": (0, 1, 2, None, None),
                 "vllm::rocm_aiter_rmsnorm2d_fwd_with_add": (0, 1, 2, None, None),
                 "aiter::add_rmsnorm": (1, 2, 4, 0, 3), "aiter::rmsnorm2d_fwd_with_add": (1, 2, 4, 0, 3),
                 "aiter::rmsnorm2d_fwd_with_add_ck": (1, 2, 4, 0, 3),
                 "_C::fused_add_rms_norm_static_fp8_quant": (1, 2, 3, 0, None, 4)}


def _scale(call: OpCall, layout: tuple, at: int) -> tuple[Tensor, ...]:
    """The quantisation scale a fused norm + fp8 quant op reads, when its layout has one."""
    t = call.tensor(layout[at]) if len(layout) > at else None
    return (t,) if t is not None else ()


def _rms_norm_io(call: OpCall) -> IO:
    layout = _RMS_NORM[call.name]
    oi, xi, wi = layout[:3]
    x, w = need(call.tensor(xi), "input"), need(call.tensor(wi), "weight")
    out = need(call.tensor(oi), "out") if oi is not None else x
    return IO((x, w, *_scale(call, layout, 3)), (out,))


def _fused_add_rms_norm_io(call: OpCall) -> IO:
    layout = _ADD_RMS_NORM[call.name]
    xi, ri, wi, oi, roi = layout[:5]
    x, res, w = need(call.tensor(xi), "input"), need(call.tensor(ri), "residual"), need(call.tensor(wi), "weight")
    out = need(call.tensor(oi), "out") if oi is not None else x
    res_out = need(call.tensor(roi), "residual_out") if roi is not None else res
    return IO((x, res, w, *_scale(call, layout, 5)), (out, res_out))


def _rotated(t: Tensor, rot_dim: int, head_size: int) -> Tensor:
    """The part of ``t`` ([tokens, heads·head_size]) a rotary kernel touches: rot_dim of each head."""
    if rot_dim >= head_size:
        return t
    heads = t.shape[-1] // head_size
    return Tensor((*t.shape[:-1], heads * rot_dim), t.dtype, t.itemsize)


def _rotary_io(call: OpCall) -> IO:
    positions, query = need(call.tensor(0), "positions"), need(call.tensor(1), "query")
    cache = need(call.tensor(4), "cos_sin_cache")
    head_size = call.value(3)
    if not isinstance(head_size, int) or head_size <= 0 or len(cache.shape) != 2:
        raise ValueError("head_size or cos_sin_cache shape")
    rot_dim = cache.shape[1]
    rows = Tensor((min(positions.numel, cache.shape[0]), rot_dim), cache.dtype, cache.itemsize)
    rotated = [_rotated(t, rot_dim, head_size) for t in (query, call.tensor(2)) if t is not None]
    return IO((positions, *rotated, rows), tuple(rotated))


def _rotary_flops(call: OpCall, io: IO) -> float:
    """x' = x·cos − y·sin, y' = y·cos + x·sin: 6 FLOPs per pair, 3 per rotated element."""
    return 3.0 * sum(t.numel for t in io.writes or ())


def _fp8_quant_io(call: OpCall) -> IO:
    out, x = need(call.tensor(0), "out"), need(call.tensor(1), "input")
    scale = call.tensor(2)
    return IO((x, *([scale] if scale is not None else [])), (out,))


def _reshape_and_cache_io(call: OpCall) -> IO:
    key, value = need(call.tensor(0), "key"), need(call.tensor(1), "value")
    key_cache, value_cache = need(call.tensor(2), "key_cache"), need(call.tensor(3), "value_cache")
    slots = need(call.tensor(4), "slot_mapping")
    writes = (Tensor(key.shape, key_cache.dtype, key_cache.itemsize),
              Tensor(value.shape, value_cache.dtype, value_cache.itemsize))
    scales = [t for t in (call.tensor(6), call.tensor(7)) if t is not None]
    return IO((key, value, slots, *scales), writes)


def _per_read_element(n: float, at: int = 0):
    return lambda call, io: n * io.reads[at].numel


register(OpFamily("vllm_rms_norm", tuple(_RMS_NORM), "norm", _rms_norm_io, _per_read_element(4.0),
                  fused=("rms_norm",), model="rms_norm (vLLM, SGLang, aiter): input and weight once + out once, "
                                             "4 FLOPs/element"))
register(OpFamily("vllm_fused_add_rms_norm", tuple(_ADD_RMS_NORM), "norm", _fused_add_rms_norm_io,
                  _per_read_element(5.0), fused=("add", "rms_norm"),
                  model="add + rms_norm (vLLM, SGLang, aiter): input, residual, weight once + out and the new "
                        "residual written (in place or not)"))
register(OpFamily("vllm_rotary_embedding", ("_C::rotary_embedding", "sgl_kernel::rotary_embedding"), "elementwise",
                  _rotary_io, _rotary_flops,
                  model="rotary_embedding (vLLM, SGLang): rotated part of query, key read and written, one cache "
                        "row per token"))
register(OpFamily("vllm_fp8_quant", ("_C::static_scaled_fp8_quant",), "elementwise", _fp8_quant_io,
                  _per_read_element(1.0), model="vLLM static fp8 quant: input once + fp8 out once"))
register(OpFamily("vllm_reshape_and_cache", ("_C_cache_ops::reshape_and_cache_flash",
                                             "_C_cache_ops::reshape_and_cache"), "elementwise",
                  _reshape_and_cache_io, model="vLLM reshape_and_cache: new key, value read + their cache "
                                               "slots written (cache element type)"))
