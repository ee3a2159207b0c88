"""What the models2 scripts share: the autocast training step and the NVTX range ncu profiles."""
import contextlib

import torch
import torch.nn.functional as F


def train_step(model, opt, x, y):
    """Forward under bf16 autocast, cross-entropy, backward, optimizer step, grads set to None."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


@contextlib.contextmanager
def nvtx_range(on: bool):
    """NVTX start/end range 'step_ncu' around one call, for ``ncu --nvtx-include 'regex:step_ncu'``: a
    start/end range holds the kernels every thread launches (backward runs on autograd's own thread,
    outside a push/pop range of this one)."""
    handle = torch.cuda.nvtx.range_start("step_ncu") if on else None
    try:
        yield
    finally:
        if on:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_end(handle)
