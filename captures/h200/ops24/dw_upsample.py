"""Depthwise convolutions and upsampling on an H200, for the op records of issue 24.9.

cuDNN is off so that PyTorch runs its own depthwise kernels (aten::_conv_depthwise2d): a 2-D depthwise
3x3 conv (fp32, x [8, 64, 56, 56], groups 64, padding 1, bias) and a causal 1-D depthwise conv of width 4
(bf16, x [1, 1024, 8], groups 1024, padding 3: a Mamba/DeltaNet-style short conv, which PyTorch runs as a 2-D
depthwise conv); then upsample_nearest2d and upsample_bilinear2d by 2 of [8, 64, 28, 28] fp32.
Profiled by the script itself (torch.profiler, shapes on, schedule: 1 warm-up step, 3 active steps, one
ProfilerStep per forward call), as a user's own profiler call would: python dw_upsample.py OUT.json.gz
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.enabled = False


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw2 = nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=True)
        self.dw1 = nn.Conv1d(1024, 1024, 4, padding=3, groups=1024, bias=False).to(torch.bfloat16)

    def forward(self, x, s, y):
        a = self.dw2(x)
        b = self.dw1(s)
        c = F.interpolate(y, scale_factor=2, mode="nearest")
        d = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return a, b, c, d


def main():
    torch.manual_seed(0)
    net = Net().cuda()
    x = torch.randn(8, 64, 56, 56, device="cuda")
    s = torch.randn(1, 1024, 8, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8, 64, 28, 28, device="cuda")
    from torch.profiler import ProfilerActivity, profile, schedule
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                                  schedule=schedule(wait=0, warmup=1, active=3),
                                  on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
        for _ in range(4):
            out = net(x, s, y)
            torch.cuda.synchronize()
            prof.step()
    print("dw_upsample:", [tuple(o.shape) for o in out], flush=True)


if __name__ == "__main__":
    main()
