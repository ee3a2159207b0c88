"""Attention: two products (Q·Kᵀ and P·V) of 2·B·H·Sq·Sk·D FLOPs each. Causal masking keeps the
(query, key) pairs the mask allows: PyTorch aligns ``is_causal`` to the top left (query i sees keys
0..i: Sq(Sq+1)/2 pairs when Sq ≤ Sk, S(S+1)/2 when square), the efficient kernel's mask type 2 to the
bottom right (query i sees keys 0..Sk−Sq+i).

Bytes = q, k, v (and a mask or bias when given) read once + the output written once. The softmax
between the products is counted in neither term: it is small next to the products at real head
sizes. Backward: grad_out, q, k, v and out read, dq, dk, dv written; five products (2.5× forward).
Each record names where its arguments sit (is_causal, mask) in its own signature.
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import OpCall, Tensor, need

FORWARD_OPS = ("mm", "softmax", "mm")
BACKWARD_OPS = ("mm", "softmax", "mm", "mm", "_softmax_backward_data", "mm", "mm")


def _qkv(call: OpCall, first: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    return (need(call.tensor(first), "q"), need(call.tensor(first + 1), "k"), need(call.tensor(first + 2), "v"))


def _dims(q: Tensor, k: Tensor, v: Tensor, layout: str) -> tuple[int, int, int, int, int]:
    """(batch·heads, Sq, Sk, D, Dv) in BHSD (torch's SDPA) or BSHD (flash-attention's own) layout."""
    if layout == "BHSD":
        *batch, sq, d = q.shape
        sk, dv = k.shape[-2], v.shape[-1]
    else:
        b, sq, h, d = q.shape
        sk, dv = k.shape[1], v.shape[-1]
        batch = [b, h]
    bh = 1
    for x in batch:
        bh *= x
    return bh, sq, sk, d, dv


def pairs(sq: int, sk: int, causal) -> int:
    """(query, key) pairs attended: all of them, or those a causal mask keeps ("top_left" for
    PyTorch's is_causal, "bottom_right" for the efficient kernel's mask type 2)."""
    if not causal:
        return sq * sk
    if causal == "bottom_right":
        offset = sk - sq                             # query i sees keys 0..offset+i
        return sq * offset + sq * (sq + 1) // 2 if offset >= 0 else sk * (sk + 1) // 2
    top = min(sq, sk)                                # query i sees keys 0..i (all keys once i ≥ sk)
    return top * (top + 1) // 2 + max(0, sq - sk) * sk


def forward(layout: str, causal, mask_at: int | None, qkv_at: int = 0, lse_at: int | bool = False):
    """IO and FLOPs functions of a forward attention signature; ``lse_at``: True when the op always
    writes the fp32 log-sum-exp [B·H, Sq] backward needs, an index when a flag argument asks for it."""
    def io(call: OpCall) -> IO:
        q, k, v = _qkv(call, qkv_at)
        bh, sq, _, _, dv = _dims(q, k, v, layout)
        extra = call.tensor(mask_at) if mask_at is not None else None
        out = Tensor((bh * sq * dv,), q.dtype, q.itemsize)
        lse = lse_at is True or (isinstance(lse_at, int) and not isinstance(lse_at, bool)
                                  and call.value(lse_at) is True)
        writes = (out,) + ((Tensor((bh * sq,), "fp32", 4),) if lse else ())
        return IO((q, k, v) + ((extra,) if extra is not None else ()), writes)

    def flops(call: OpCall, _io: IO) -> float:
        q, k, v = _qkv(call, qkv_at)
        bh, sq, sk, d, dv = _dims(q, k, v, layout)
        return 2.0 * bh * pairs(sq, sk, causal(call)) * (d + dv)
    return io, flops


def backward(layout: str, causal):
    """grad_out, q, k, v (arguments 0–3), out, the log-sum-exp (and a bias) read: every tensor the
    call records; dq, dk, dv written; 2.5× the forward's FLOPs."""
    def io(call: OpCall) -> IO:
        q, k, v = _qkv(call, 1)
        need(call.tensor(0), "grad_out")
        return IO(tuple(call.tensors()), (q, k, v))

    def flops(call: OpCall, _io: IO) -> float:
        q, k, v = _qkv(call, 1)
        bh, sq, sk, d, dv = _dims(q, k, v, layout)
        return 2.5 * 2.0 * bh * pairs(sq, sk, causal(call)) * (d + dv)
    return io, flops


def _flag(i: int):
    return lambda call: "top_left" if call.value(i) is True else None


def _mask_type(i: int):
    """The efficient kernels' custom_mask_type: 1 causal from the top left, 2 from the bottom right."""
    return lambda call: {1: "top_left", 2: "bottom_right"}.get(call.value(i))


def _note(text: str, causal):
    return lambda call: text + (", causal: the pairs the mask keeps" if causal(call) else "")


def _attention(name: str, ops: tuple[str, ...], io_flops, causal, text: str) -> None:
    io, flops = io_flops
    fused = BACKWARD_OPS if "backward" in name else FORWARD_OPS
    register(OpFamily(name, ops, "attention", io, flops, unit="matrix", dtype=lambda call, io: io.writes[0].dtype,
                      fused=fused, model=_note(text, causal)))


# signature: q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa
_attention("sdpa", aten("scaled_dot_product_attention"), forward("BHSD", _flag(5), 3), _flag(5),
           "sdpa: 4·B·H·Sq·Sk·D")
# q, k, v, dropout_p, is_causal, return_debug_mask, scale
_attention("sdpa_flash", aten("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"),
           forward("BHSD", _flag(4), None, lse_at=True), _flag(4), "flash sdpa: 4·B·H·Sq·Sk·D")
# q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...
_attention("sdpa_efficient", aten("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
           forward("BHSD", _flag(6), 3, lse_at=4), _flag(6), "efficient/cudnn sdpa: 4·B·H·Sq·Sk·D")
# q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ... (B, S, H, D)
_attention("flash_forward", aten("_flash_attention_forward"), forward("BSHD", _flag(8), None, lse_at=True), _flag(8),
           "flash forward: 4·B·H·Sq·Sk·D")
# q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type
_attention("efficient_forward", aten("_efficient_attention_forward"),
           forward("BSHD", _mask_type(9), 3, lse_at=10), _mask_type(9),
           "efficient forward: 4·B·H·Sq·Sk·D")
# q, k, v, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, compute_log_sumexp, dropout_p, is_causal, ...
_attention("cudnn_forward", aten("_cudnn_attention_forward"), forward("BHSD", _flag(10), 3, lse_at=8), _flag(10),
           "cudnn forward: 4·B·H·Sq·Sk·D")
# grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...
_attention("sdpa_flash_backward", aten("_scaled_dot_product_flash_attention_backward"),
           backward("BHSD", _flag(11)), _flag(11), "flash sdpa backward: 2.5× forward")
# grad_out, q, k, v, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask, is_causal
_attention("sdpa_efficient_backward", aten("_scaled_dot_product_efficient_attention_backward"),
           backward("BHSD", _flag(11)), _flag(11), "efficient sdpa backward: 2.5× forward")
# grad_out, q, k, v, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
# dropout_p, is_causal, scale
_attention("cudnn_backward", aten("_scaled_dot_product_cudnn_attention_backward", "_cudnn_attention_backward"),
           backward("BHSD", _flag(14)), _flag(14), "cudnn sdpa backward: 2.5× forward")
# grad_out, q, k, v, bias, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, logsumexp, dropout_p,
# philox_seed, philox_offset, custom_mask_type (1, 2: causal), ...  (B, S, H, D)
_attention("efficient_backward", aten("_efficient_attention_backward"),
           backward("BSHD", _mask_type(14)), _mask_type(14),
           "efficient backward: 2.5× forward")
_attention("flash_backward", aten("_flash_attention_backward"), backward("BSHD", _flag(11)), _flag(11),
           "flash backward: 2.5× forward")
# composite: its bmm/softmax children launch the kernels and carry the cost
register(OpFamily("sdpa_math", aten("_scaled_dot_product_attention_math"), "attention", fused=FORWARD_OPS))
