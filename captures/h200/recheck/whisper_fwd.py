"""Whisper forward: transformers' WhisperForConditionalGeneration, random init, bf16, no grad.

Whisper-base's widths (d_model 512, 8 heads, FFN 2,048, 80 mel bins, 3,000 frames -> 1,500 encoder
positions, vocabulary 51,865) with 2 encoder and 2 decoder layers, batch 2, 32 decoder tokens, sdpa
attention. One step = one forward (encoder: two conv1d + layers; decoder: self- and cross-attention,
logits). Capture with --step-fn whisper_fwd:forward_step.
"""
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

from _common import loop, parser  # the script's folder is on sys.path


def forward_step(model, feats, dec):
    """One forward: encoder over the features, decoder over the tokens; greedy next tokens."""
    with torch.no_grad():
        return model(input_features=feats, decoder_input_ids=dec).logits[:, -1].argmax(-1)


def main():
    p = parser(__doc__)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--dec", type=int, default=32)
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    small = a.small
    d = 64 if small else 512
    cfg = WhisperConfig(vocab_size=1000 if small else 51865, num_mel_bins=80, d_model=d,
                        encoder_layers=a.layers, decoder_layers=a.layers, encoder_attention_heads=8,
                        decoder_attention_heads=8, encoder_ffn_dim=4 * d, decoder_ffn_dim=4 * d,
                        max_source_positions=1500, max_target_positions=448, attn_implementation="sdpa",
                        **({"pad_token_id": 1, "bos_token_id": 2, "eos_token_id": 2, "decoder_start_token_id": 3} if small else {}))
    model = WhisperForConditionalGeneration(cfg).to(dev, torch.bfloat16).eval()
    g = torch.Generator(device="cpu").manual_seed(1)
    feats = torch.randn(a.batch, 80, 3000, generator=g).to(dev, torch.bfloat16)
    dec = torch.randint(0, cfg.vocab_size, (a.batch, a.dec), generator=g).to(dev)
    print(f"whisper_fwd: params {sum(q.numel() for q in model.parameters())}, batch {a.batch}, "
          f"attn {model.config._attn_implementation}", flush=True)
    loop("whisper_fwd", a, lambda m, f, t: forward_step(m, f, t), model, feats, dec)


if __name__ == "__main__":
    main()
