"""torchvision ResNet-50 training step: random init, channels_last, bf16 autocast, SGD with momentum
(foreach), cross-entropy on random labels. One step = one call of train_step
(capture with --step-fn resnet50_train:train_step)."""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
import torchvision


def train_step(model, opt, x, y):
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--res", type=int, default=224)
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = torchvision.models.resnet50(weights=None).to(dev).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(a.batch, 3, a.res, a.res, generator=g).to(dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), generator=g).to(dev)
    print(f"resnet50_train: params {sum(q.numel() for q in model.parameters())}, batch {a.batch}, res {a.res}",
          flush=True)
    t0 = time.perf_counter()
    for i in range(a.iters):
        with nvtx_range(a.nvtx_step == i):
            loss = train_step(model, opt, x, y)
    print(f"resnet50_train: {a.iters} steps {time.perf_counter() - t0:.3f} s, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
