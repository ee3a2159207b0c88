"""Hugging Face BERT-base encoder inference: BertModel from BertConfig() (random init, no download),
fp16, batch 32 × 128 tokens with an attention mask (the last quarter of each row padded),
torch.inference_mode(). One step = one forward call (the default root-module step rule)."""
import argparse
import time

import torch
from transformers import BertConfig, BertModel

from _common import nvtx_range  # the script's folder is on sys.path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    model = BertModel(BertConfig()).to(dev, dtype).eval()
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, 30522, (a.batch, a.seq), generator=g).to(dev)
    mask = torch.ones(a.batch, a.seq, dtype=torch.long, device=dev)
    mask[:, a.seq * 3 // 4:] = 0
    print(f"bert_infer: params {sum(q.numel() for q in model.parameters())}, batch {a.batch}, seq {a.seq}, "
          f"attention {model.config._attn_implementation}", flush=True)
    with torch.inference_mode():
        t0 = time.perf_counter()
        for i in range(a.iters):
            with nvtx_range(a.nvtx_step == i):
                out = model(input_ids=ids, attention_mask=mask).last_hidden_state
        if dev.type == "cuda":
            torch.cuda.synchronize()
    print(f"bert_infer: {a.iters} forwards {time.perf_counter() - t0:.3f} s; out {tuple(out.shape)} "
          f"mean {out.float().mean().item():.5f}", flush=True)


if __name__ == "__main__":
    main()
