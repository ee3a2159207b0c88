"""timm ConvNeXt-T training step: random init, bf16 autocast, fused AdamW, cross-entropy on random labels,
batch 32 at 224 (channels-first, timm's default). One step = one call of train_step (capture with
--step-fn convnext_train:train_step)."""
import torch
import torch.nn.functional as F

from _common import loop, parser  # the script's folder is on sys.path


def train_step(model, opt, x, y):
    """Forward under bf16 autocast, cross-entropy, backward, optimizer step, grads set to None."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    p = parser(__doc__)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--res", type=int, default=224)
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    try:
        import timm
        model = timm.create_model("convnext_tiny", pretrained=False, num_classes=1000)
    except ImportError:                         # a CPU dry run without timm
        import torchvision
        model = torchvision.models.convnext_tiny()
    model = model.to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=a.device == "cuda")
    g = torch.Generator(device="cpu").manual_seed(1)
    res = 64 if a.small else a.res
    batch = 2 if a.small else a.batch
    x = torch.randn(batch, 3, res, res, generator=g).to(dev)
    y = torch.randint(0, 1000, (batch,), generator=g).to(dev)
    print(f"convnext_train: params {sum(q.numel() for q in model.parameters())}, batch {batch}, res {res}",
          flush=True)
    loss = loop("convnext_train", a, lambda *t: train_step(*t), model, opt, x, y)
    print(f"convnext_train: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
