"""Benchmark trace: pre-norm transformer (blocks as in block.py), eager training
(forward + backward + AdamW), profiled with record_shapes.

python3 captures/h200/big.py --out DIR [--layers 24 --d 1024 --heads 16 --seq 512 --batch 4
                                        --steps 40 --precision amp|bf16 --target-mb 40 --adapt 1]
amp  = fp32 master weights + torch.autocast(bfloat16); bf16 = plain bf16 params.

With --adapt 1 the script first profiles short probes (2 recorded steps) at --layers and at 2 layers,
fits raw-JSON bytes/step = a + b*layers, and then:
  * if --layers x --steps lands in [0.75, 1.5] x target: writes big_train_{steps}steps.json.gz only;
  * else writes big_train_{steps}steps.json.gz with the layer count that hits ~target MB, AND
    big_train_{layers}layers_{n}steps.json.gz with --layers and the step count that hits ~target MB.
Every choice is logged. With --adapt 0: one trace with exactly --layers and --steps.
"""
import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import dev_arg, gzip_file, log, make_profiler, print_results, run_guarded, summarize, sync
from block import Block


class Model(nn.Module):
    def __init__(self, layers, d, h, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, h, 4 * d) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tok, tgt):
        x = self.emb(tok)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def train_trace(args, layers, steps, name, keep=True):
    dev = args.device
    torch.manual_seed(2024)
    pdt = torch.bfloat16 if args.precision == "bf16" else torch.float32
    m = Model(layers, args.d, args.heads, args.vocab).to(dev, pdt).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01, foreach=bool(args.foreach))
    tok = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev)
    tgt = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev)
    use_amp = args.precision == "amp"

    def step():
        with torch.autocast(device_type=dev.split(":")[0], dtype=torch.bfloat16, enabled=use_amp):
            loss = m(tok, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    for _ in range(3):
        loss = step()
    sync(dev)
    log(f"  [{name}] layers={layers} steps={steps} warm-up {time.time()-t0:.1f}s loss={loss.item():.4f}")
    path = os.path.join(args.out, name + ".json")
    t0 = time.time()
    with make_profiler(dev, steps, path) as prof:
        for _ in range(1 + steps):
            loss = step()
            prof.step()  # no per-step sync: a realistic training loop
    sync(dev)
    log(f"  [{name}] profiled loop+export {time.time()-t0:.1f}s, final loss={loss.item():.4f}")
    raw = os.path.getsize(path)
    del m, opt
    gc.collect()
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
    if not keep:
        os.remove(path)
        return raw, None
    gz, raw = gzip_file(path)
    s = summarize(gz)
    s.update(raw_bytes=raw, layers=layers, steps_profiled=steps)
    log(f"  [{name}] raw JSON {raw/1e6:.2f} MB; events {s['events']}; per-step kernels "
        f"{s['kernels_per_step']}; cats {s['cats']}")
    return raw, s


def main():
    p = argparse.ArgumentParser()
    dev_arg(p)
    p.set_defaults(steps=40)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--d", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--precision", default="amp", choices=["amp", "bf16"])
    p.add_argument("--foreach", type=int, default=1, help="AdamW foreach (1) or for-loop (0)")
    p.add_argument("--target-mb", type=float, default=40.0)
    p.add_argument("--adapt", type=int, default=1)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    L, N, T = args.layers, args.steps, args.target_mb * 1e6
    plan = [(L, N, f"big_train_{N}steps")]
    if args.adapt:
        try:
            PS = 2
            rL, _ = train_trace(args, L, PS, "probe_L", keep=False)
            r2, _ = train_trace(args, 2, PS, "probe_2", keep=False)
            b = (rL - r2) / PS / (L - 2)
            a = r2 / PS - 2 * b
            est = a + b * L
            log(f"  probe: bytes/step = {a:.0f} + {b:.0f}*layers; at {L} layers {est/1e6:.2f} MB/step "
                f"-> {N} steps ~ {N*est/1e6:.1f} MB")
            if not (0.75 * T <= N * est <= 1.5 * T):
                l40 = max(1, min(L, round((T / N - a) / b)))
                nL = max(2, min(N, round(T / est)))
                plan = [(l40, N, f"big_train_{N}steps"), (L, nL, f"big_train_{L}layers_{nL}steps")]
                log(f"  {L} layers x {N} steps misses the target; plan: {plan}")
        except Exception as ex:
            log(f"  probe failed ({ex!r}); falling back to plain plan {plan}")
    for lay, n, name in plan:
        run_guarded(name, lambda: train_trace(args, lay, n, name)[1], results)
    print_results(results)


if __name__ == "__main__":
    main()
