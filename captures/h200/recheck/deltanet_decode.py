"""Qwen3.5-0.8B-shaped hybrid decode: transformers' Qwen3_5ForCausalLM, random init, bf16, batch 1.

Qwen3.5-0.8B's widths (hidden 1,024, MLP 3,584, 8 query / 2 KV heads of 256, gated DeltaNet with 16 key
and 16 value heads of 128, conv kernel 4, vocabulary 248,320, tied embedding) with 4 layers of its
pattern (3 gated-DeltaNet linear-attention layers, then 1 full-attention layer). No flash-linear-attention
or causal-conv1d on the device: transformers' torch fallbacks run (the recurrent gated delta rule, the
depthwise conv1d). A 64-token prompt is prefilled once outside the steps; one step = one decode token
(model call with the cache, greedy argmax). Capture with --step-fn deltanet_decode:decode_step.
"""
import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

from _common import loop, parser  # the script's folder is on sys.path


def decode_step(model, tok, cache):
    """One token: the model on the last token with the cache, greedy next token."""
    with torch.no_grad():
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
    return out.logits[:, -1:].argmax(-1), model, out.past_key_values


def main():
    p = parser(__doc__)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--prompt", type=int, default=64)
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    small = a.small
    cfg = Qwen3_5TextConfig(
        hidden_size=128 if small else 1024, intermediate_size=256 if small else 3584,
        num_hidden_layers=a.layers, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * (a.layers // 4),
        num_attention_heads=8, num_key_value_heads=2, head_dim=32 if small else 256,
        linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=16 if small else 128,
        linear_value_head_dim=16 if small else 128, linear_conv_kernel_dim=4,
        vocab_size=1000 if small else 248320, tie_word_embeddings=True, max_position_embeddings=4096,
        rms_norm_eps=1e-6)
    model = Qwen3_5ForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    g = torch.Generator(device="cpu").manual_seed(1)
    prompt = torch.randint(0, cfg.vocab_size, (1, a.prompt), generator=g).to(dev)
    print(f"deltanet_decode: params {sum(q.numel() for q in model.parameters())}, layers {cfg.layer_types}, "
          f"attn {model.config._attn_implementation}", flush=True)
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
    tok, cache = out.logits[:, -1:].argmax(-1), out.past_key_values
    print(f"deltanet_decode: cache {type(cache).__name__}", flush=True)
    loop("deltanet_decode", a, lambda t, m, c: decode_step(m, t, c), tok, model, cache)


if __name__ == "__main__":
    main()
