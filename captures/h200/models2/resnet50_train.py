"""torchvision ResNet-50 training step: random init, channels_last, bf16 autocast, SGD with momentum
(foreach), cross-entropy on random labels. One step = one call of train_step
(capture with --step-fn resnet50_train:train_step)."""
import argparse
import time

import torch
import torchvision

from _common import nvtx_range, train_step  # the script's folder is on sys.path


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
