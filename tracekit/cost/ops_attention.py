"""Attention: two products (Q·Kᵀ and P·V) of 2·B·H·Sq·Sk·D FLOPs each; causal masking halves them.

Bytes = q, k, v (and a mask or bias when given) read once + the output written once. The softmax
between the products is counted in neither term: it is small next to the products at real head sizes.
"""

from __future__ import annotations

from tracekit.cost.registry import Cost, OpCall, Tensor, need, register


def _attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, layout: str, extra: list[Tensor],
               model: str, backward: bool = False) -> Cost:
    if layout == "BHSD":
        *batch, sq, d = q.shape
        sk, dv = k.shape[-2], v.shape[-1]
    else:                                   # BSHD: flash-attention's own layout
        b, sq, h, d = q.shape
        sk, dv = k.shape[1], v.shape[-1]
        batch = [b, h]
    bh = 1
    for x in batch:
        bh *= x
    flops = 2.0 * bh * sq * sk * d + 2.0 * bh * sq * sk * dv
    if causal:
        flops /= 2
    out_bytes = bh * sq * dv * q.itemsize
    nbytes = q.nbytes + k.nbytes + v.nbytes + sum(t.nbytes for t in extra) + out_bytes
    if backward:     # reads grad_out, q, k, v, out; writes dq, dk, dv; 5 products instead of 2
        flops *= 2.5
        nbytes = 2 * out_bytes + 2 * (q.nbytes + k.nbytes + v.nbytes) + sum(t.nbytes for t in extra)
    return Cost(flops=flops, bytes=float(nbytes), dtype=q.dtype, unit="matrix",
                model=model + (", causal: half" if causal else ""))


def _qkv(call: OpCall, first: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    return (need(call.tensor(first), "q"), need(call.tensor(first + 1), "k"), need(call.tensor(first + 2), "v"))


@register("aten::scaled_dot_product_attention")
def sdpa(call: OpCall) -> Cost:
    # q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa
    q, k, v = _qkv(call)
    mask = call.tensor(3)
    return _attention(q, k, v, bool(call.value(5)), "BHSD", [mask] if mask else [], "sdpa: 4·B·H·Sq·Sk·D")


@register("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_for_cpu")
def sdpa_flash(call: OpCall) -> Cost:
    # q, k, v, dropout_p, is_causal, return_debug_mask, scale
    q, k, v = _qkv(call)
    return _attention(q, k, v, bool(call.value(4)), "BHSD", [], "flash sdpa: 4·B·H·Sq·Sk·D")


@register("aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention")
def sdpa_efficient(call: OpCall) -> Cost:
    # q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...
    q, k, v = _qkv(call)
    bias = call.tensor(3)
    return _attention(q, k, v, bool(call.value(6)), "BHSD", [bias] if bias else [],
                      "efficient/cudnn sdpa: 4·B·H·Sq·Sk·D")


@register("aten::_flash_attention_forward")
def flash_forward(call: OpCall) -> Cost:
    # q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...  (B, S, H, D layout)
    q, k, v = _qkv(call)
    return _attention(q, k, v, bool(call.value(8)), "BSHD", [], "flash forward: 4·B·H·Sq·Sk·D")


@register("aten::_efficient_attention_forward")
def efficient_forward(call: OpCall) -> Cost:
    # q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type
    q, k, v = _qkv(call)
    bias = call.tensor(3)
    return _attention(q, k, v, call.value(9) in (1, 2), "BSHD", [bias] if bias else [],
                      "efficient forward: 4·B·H·Sq·Sk·D")


@register("aten::_scaled_dot_product_flash_attention_backward")
def sdpa_flash_backward(call: OpCall) -> Cost:
    # grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...
    q, k, v = _qkv(call, first=1)
    return _attention(q, k, v, bool(call.value(11)), "BHSD", [], "flash sdpa backward: 2.5× forward", True)


@register("aten::_scaled_dot_product_efficient_attention_backward",
          "aten::_scaled_dot_product_cudnn_attention_backward")
def sdpa_efficient_backward(call: OpCall) -> Cost:
    q, k, v = _qkv(call, first=1)
    causal = any(call.value(i) is True for i in range(8, min(len(call.dims), 12)))
    return _attention(q, k, v, causal, "BHSD", [], "efficient sdpa backward: 2.5× forward", True)


@register("aten::_flash_attention_backward")
def flash_backward(call: OpCall) -> Cost:
    # grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...
    q, k, v = _qkv(call, first=1)
    return _attention(q, k, v, bool(call.value(11)), "BSHD", [], "flash backward: 2.5× forward", True)


@register("aten::_cudnn_attention_forward")
def cudnn_forward(call: OpCall) -> Cost:
    # q, k, v, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, compute_log_sumexp, dropout_p, is_causal, ...
    q, k, v = _qkv(call)
    bias = call.tensor(3)
    return _attention(q, k, v, bool(call.value(10)), "BHSD", [bias] if bias else [], "cudnn forward: 4·B·H·Sq·Sk·D")
