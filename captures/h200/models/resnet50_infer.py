"""torchvision ResNet-50 inference: random init (no downloaded weights), bf16, channels_last, batch 32,
torch.inference_mode(). One step = one forward call (the default root-module step rule)."""
import argparse
import time

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--res", type=int, default=224)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = torchvision.models.resnet50(weights=None).to(dev, torch.bfloat16).to(memory_format=torch.channels_last).eval()
    n = sum(p.numel() for p in model.parameters())
    nb = sum(b.numel() * b.element_size() for b in model.buffers())
    print(f"resnet50_infer: params {n} ({n * 2} bytes bf16), buffers {nb} bytes, batch {a.batch}, res {a.res}", flush=True)
    x = torch.randn(a.batch, 3, a.res, a.res, device=dev).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        t0 = time.perf_counter()
        for _ in range(a.iters):
            out = model(x)
        if dev.type == "cuda":
            torch.cuda.synchronize()
    print(f"resnet50_infer: {a.iters} forwards {time.perf_counter() - t0:.3f} s; out {tuple(out.shape)} "
          f"mean {out.float().mean().item():.5f}", flush=True)


if __name__ == "__main__":
    main()
