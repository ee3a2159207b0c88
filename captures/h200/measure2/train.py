"""GPU-bound training step: the GPT of ../models/gpt_train.py at its defaults (4 layers, d 768, batch 8 x 1024
tokens, bf16 autocast, fused AdamW). One step = one call of step() (forward, loss, backward, optimizer).

python3 train.py [--iters N]            under `tracekit measure` (--step-fn train:step)
python3 train.py --plain OUT.json       plain NVML loop (plain.py)
"""
import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "models")]
from gpt_train import GPT, train_step  # noqa: E402

import plain  # noqa: E402


def step(model, opt, x, y):
    return train_step(model, opt, x, y, "cuda")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--plain", default=None)
    p.add_argument("--windows", type=int, default=5)
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = GPT(32768, 1024, 768, 12, 4).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randint(0, 32768, (8, 1024), device=dev, generator=g)
    y = torch.randint(0, 32768, (8, 1024), device=dev, generator=g)
    if a.plain:
        res = {"step": plain.windows(lambda: step(model, opt, x, y), a.windows)}
        Path(a.plain).write_text(json.dumps(res, indent=1))
        print("train plain step: " + " ".join(f"{w['j_per_call']:.4f} J {w['us_per_call']:.1f} us"
                                              for w in res["step"]["windows"]), flush=True)
        return
    for _ in range(a.iters):
        loss = step(model, opt, x, y)
    print(f"train: {a.iters} steps, loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
