"""ATen kernels without a launching op (graph replays): the functor their name spells says the op."""

from __future__ import annotations

import re

# ATen kernels replayed without an op (graph replays): the functor in the name says the op
ATEN_FUNCTORS = [(re.compile(p), op) for p, op in (
    (r"CUDAFunctor_add|AddFunctor", "add"), (r"CUDAFunctorOnSelf_add|CUDAFunctorOnOther_add", "add"),
    (r"MulFunctor", "mul"), (r"DivFunctor|div_true_kernel|div_floor_kernel", "div"), (r"SubFunctor", "sub"),
    (r"FillFunctor", "fill"), (r"direct_copy_kernel|copy_kernel", "copy"), (r"neg_kernel", "neg"),
    (r"exp_kernel", "exp"), (r"log2_kernel", "log2"), (r"log_kernel", "log"), (r"sigmoid_kernel", "sigmoid"),
    (r"tanh_kernel", "tanh"), (r"sqrt_kernel", "sqrt"), (r"rsqrt_kernel", "rsqrt"), (r"abs_kernel", "abs"),
    (r"clamp_kernel|clamp_min|clamp_max", "clamp"), (r"threshold_kernel", "threshold"),
    (r"(?<![a-z])relu", "relu"), (r"GeluCUDAKernel|gelu_kernel", "gelu"), (r"silu_kernel", "silu"),
    (r"MaxOps|max_values", "amax"), (r"MinOps|min_values", "amin"), (r"MeanOps", "mean"),
    (r"sum_functor|sum_kernel", "sum"), (r"CatArrayBatchedCopy", "cat"), (r"where_kernel", "where"),
    (r"softmax_warp_forward|SoftMaxForward|cunn_SoftMaxForward", "_softmax"),
    (r"layer_norm_kernel|LayerNormForward|RowwiseMomentsCUDAKernel", "native_layer_norm"),
    (r"batch_norm_collect_statistics|batch_norm_transform_input", "native_batch_norm"),
    (r"index_select|indexSelect", "index_select"), (r"embedding", "embedding"),
    (r"AdamFunctor|FusedAdam", "_fused_adam"), (r"AdamWFunctor", "_fused_adamw"),
    (r"compare_scalar_kernel|CompareEqFunctor|eq_kernel", "eq"), (r"pow_tensor_scalar|pow_kernel", "pow"),
)]


def op_from_kernel_name(name: str) -> str | None:
    """The aten op (plain name) an ATen kernel's functor names, or None."""
    for rx, op in ATEN_FUNCTORS:
        if rx.search(name):
            return op
    return None
