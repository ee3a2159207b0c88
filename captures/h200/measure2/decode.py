"""Tiny Llama-shaped eager decode, batch 1: host-bound (the model of ../models/llama_decode.py at 4 layers,
d 1024, 8 heads, hidden 2816, vocab 32000, KV cache of 512 slots, bf16). One step = one call of step()
(a decode step: the model, argmax, pos += 1).

python3 decode.py [--iters N] [--module]      under `tracekit measure` (--step-fn decode:step, or, with
                                              --module, the root module model(tok, pos) alone)
python3 decode.py --plain OUT.json            plain NVML loops (plain.py): the step with pos copied back
                                              before each call (as measure's --reset-args does), the
                                              module alone, and the step again after a torch.profiler run
"""
import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "models")]
from llama_decode import Llama, decode_step  # noqa: E402

import plain  # noqa: E402


def step(model, tok, pos):
    return decode_step(model, tok, pos, False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--module", action="store_true")
    p.add_argument("--plain", default=None)
    p.add_argument("--windows", type=int, default=5)
    a = p.parse_args()
    torch.manual_seed(0)
    dev, dt, prefill = torch.device("cuda"), torch.bfloat16, 448
    with torch.device(dev):
        model = Llama(32000, 1024, 4, 8, 8, 2816, 512, 1, dt).to(dt)
    model.eval().requires_grad_(False)
    g = torch.Generator(device=dev).manual_seed(1)
    for layer in model.layers:
        for c in (layer.attention.k_cache, layer.attention.v_cache):
            c[:, :, :prefill].normal_(generator=g)
    tok = torch.randint(0, 32000, (1, 1), device=dev, generator=g)
    pos = torch.tensor([prefill], device=dev, dtype=torch.long)
    print(f"decode: params {sum(q.numel() for q in model.parameters())}", flush=True)
    with torch.inference_mode():
        if a.plain:
            p0 = pos.clone()

            def call_step():
                pos.copy_(p0)
                step(model, tok, pos)

            res = {"step": plain.windows(call_step, a.windows), "module": plain.windows(lambda: model(tok, pos), a.windows)}
            plain.profile_a_few(call_step)
            res["step_after_profiler"] = plain.windows(call_step, a.windows)
            Path(a.plain).write_text(json.dumps(res, indent=1))
            for k, v in res.items():
                print(f"decode plain {k}: " + " ".join(f"{w['j_per_call']:.5f} J {w['us_per_call']:.1f} us"
                                                       for w in v["windows"]), flush=True)
            return
        for _ in range(a.iters):
            out = model(tok, pos) if a.module else step(model, tok, pos)
        torch.cuda.synchronize()
    print(f"decode: {a.iters} calls, out {tuple(out.shape)}", flush=True)


if __name__ == "__main__":
    main()
