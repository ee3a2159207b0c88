"""L2 against DRAM on this GPU (a copy of captures/h200/l2/l2_bandwidth.py), in kernel time as the profiler records it, issue 24.4.

The GPU is first kept busy 2 s (bf16 matmuls) so its clocks are up. Then, each 50 times under
torch.profiler, the kernel durations (median, min) of:
  copy N MiB      dst.copy_(src), fp32 (a device-to-device memcpy), N = 8, 12, 16 (both buffers fit the H100 50 MB and H200 60 MiB L2; bytes 2 x N)
  copy 1024 MiB   the same from DRAM
  cast hot        torch.add(x, y, out=h) then b16.copy_(h): GPT-2's fp32 -> bf16 copy_ of 8x1024x768,
                  its input just written by the kernel before (37,748,736 B: 4 read + 2 written per element)
  cast cold       the same with a 256 MiB fill_ between the add and the cast (L2 evicted)
"""
import json
import statistics
import torch
from torch.profiler import ProfilerActivity, profile

dev = torch.device("cuda")
MIB = 1 << 20
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
t_end = __import__("time").time() + 2
while __import__("time").time() < t_end:
    a @ a
torch.cuda.synchronize()


def kernels(fn, match, n=50):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    p.export_chrome_trace("/tmp/l2_trace.json")
    events = json.load(open("/tmp/l2_trace.json"))["traceEvents"]
    d = [e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy") and match in e["name"]]
    return statistics.median(d), min(d), len(d)


def show(label, nbytes, r):
    print(f"{label}: median {r[0]:.3f} us ({nbytes / r[0] / 1e3:.0f} GB/s), min {r[1]:.3f} us "
          f"({nbytes / r[1] / 1e3:.0f} GB/s), {r[2]} kernels, {nbytes} B", flush=True)


print(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
for mib in (8, 12, 16, 1024):
    src = torch.randn(mib * MIB // 4, device=dev)
    dst = torch.empty_like(src)
    show(f"copy {mib} MiB", 2 * mib * MIB, kernels(lambda: dst.copy_(src), "Memcpy DtoD"))
    del src, dst
shape = (8, 1024, 768)
x, y, h = (torch.randn(shape, device=dev) for _ in range(3))
b16 = torch.empty(shape, device=dev, dtype=torch.bfloat16)
big = torch.empty(256 * MIB // 4, device=dev)
show("cast hot", x.numel() * 6, kernels(lambda: (torch.add(x, y, out=h), b16.copy_(h)), "bfloat16_copy"))
show("cast cold", x.numel() * 6,
     kernels(lambda: (torch.add(x, y, out=h), big.fill_(1.0), b16.copy_(h)), "bfloat16_copy"))
