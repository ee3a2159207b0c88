"""vLLM's custom ops (``_C::``, ``_C_cache_ops::``), as torch.profiler records them in vLLM traces.

Signatures are vLLM's (csrc/ops.h, csrc/cache.h): outputs come first where the op takes an ``out``
tensor, and several ops work in place. Minimal bytes follow the same rule as every other record:
what the call must read once and write once.

- ``rms_norm(out, input, weight, eps)``: reads input and weight, writes out.
- ``fused_add_rms_norm(input, residual, weight, eps)``: residual += input, input = norm(residual);
  reads input, residual, weight and writes input and residual back.
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


def _rms_norm_io(call: OpCall) -> IO:
    out, x, w = need(call.tensor(0), "out"), need(call.tensor(1), "input"), need(call.tensor(2), "weight")
    return IO((x, w), (out,))


def _fused_add_rms_norm_io(call: OpCall) -> IO:
    x, res, w = need(call.tensor(0), "input"), need(call.tensor(1), "residual"), need(call.tensor(2), "weight")
    return IO((x, res, w), (x, res))


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


register(OpFamily("vllm_rms_norm", ("_C::rms_norm",), "norm", _rms_norm_io, _per_read_element(4.0),
                  model="vLLM rms_norm: input and weight once + out once, 4 FLOPs/element"))
register(OpFamily("vllm_fused_add_rms_norm", ("_C::fused_add_rms_norm",), "norm", _fused_add_rms_norm_io,
                  _per_read_element(5.0),
                  model="vLLM fused_add_rms_norm: input, residual, weight once + input, residual written"))
register(OpFamily("vllm_rotary_embedding", ("_C::rotary_embedding",), "elementwise", _rotary_io, _rotary_flops,
                  model="vLLM rotary_embedding: rotated part of query, key read and written, one cache row "
                        "per token"))
register(OpFamily("vllm_fp8_quant", ("_C::static_scaled_fp8_quant",), "elementwise", _fp8_quant_io,
                  _per_read_element(1.0), model="vLLM static fp8 quant: input once + fp8 out once"))
register(OpFamily("vllm_reshape_and_cache", ("_C_cache_ops::reshape_and_cache_flash",
                                             "_C_cache_ops::reshape_and_cache"), "elementwise",
                  _reshape_and_cache_io, model="vLLM reshape_and_cache: new key, value read + their cache "
                                               "slots written (cache element type)"))
