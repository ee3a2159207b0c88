"""Mamba2 forward (a prefill): transformers' Mamba2ForCausalLM, random init, bf16, no grad.

Mamba2-130m's widths (hidden 768, expand 2, 24 heads of 64, state 128, 1 group, conv kernel 4, chunk
256) with 4 layers, vocabulary 16,384, batch 2 × 512 tokens. No mamba-ssm or causal-conv1d on the
device: transformers' torch path runs (the chunked SSD in torch ops, the depthwise conv1d).
One step = one forward. Capture with --step-fn mamba2_fwd:forward_step.
"""
import torch
from transformers import Mamba2Config, Mamba2ForCausalLM

from _common import loop, parser  # the script's folder is on sys.path


def forward_step(model, ids):
    """One forward of the whole sequence, logits of the last position only kept."""
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits[:, -1].argmax(-1)


def main():
    p = parser(__doc__)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=512)
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    small = a.small
    cfg = Mamba2Config(hidden_size=128 if small else 768, num_hidden_layers=a.layers, expand=2,
                       num_heads=4 if small else 24, head_dim=64, state_size=16 if small else 128, n_groups=1,
                       conv_kernel=4, chunk_size=64 if small else 256, vocab_size=1000 if small else 16384,
                       tie_word_embeddings=True)
    model = Mamba2ForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    g = torch.Generator(device="cpu").manual_seed(1)
    seq = 128 if small else a.seq
    ids = torch.randint(0, cfg.vocab_size, (a.batch, seq), generator=g).to(dev)
    print(f"mamba2_fwd: params {sum(q.numel() for q in model.parameters())}, batch {a.batch}, seq {seq}", flush=True)
    loop("mamba2_fwd", a, lambda m, x: forward_step(m, x), model, ids)


if __name__ == "__main__":
    main()
