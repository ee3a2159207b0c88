"""torchvision ViT-B/16 training step: random init, bf16 autocast, fused AdamW, cross-entropy on random
labels; --compile: the model under torch.compile (default mode). One step = one call of train_step
(capture with --step-fn vit_train:train_step)."""
import argparse
import time

import torch
import torchvision

from _common import nvtx_range, train_step  # the script's folder is on sys.path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (default mode)")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = torchvision.models.vit_b_16(weights=None).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    if a.compile:
        model = torch.compile(model)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(a.batch, 3, 224, 224, generator=g).to(dev)
    y = torch.randint(0, 1000, (a.batch,), generator=g).to(dev)
    print(f"vit_train: params {sum(q.numel() for q in model.parameters())}, batch {a.batch}, compile {a.compile}",
          flush=True)
    t0 = time.perf_counter()
    for i in range(a.iters):
        with nvtx_range(a.nvtx_step == i):
            loss = train_step(model, opt, x, y)
    print(f"vit_train: {a.iters} steps {time.perf_counter() - t0:.3f} s, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
