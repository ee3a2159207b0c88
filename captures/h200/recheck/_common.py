"""What the recheck scripts share: the device, the NVTX range ncu profiles, the run loop."""
import argparse
import contextlib
import time

import torch


def parser(doc):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--nvtx-step", type=int, default=-1, help="NVTX start/end range 'step_ncu' around this call (ncu)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--small", action="store_true", help="tiny shapes (a CPU dry run)")
    return p


@contextlib.contextmanager
def nvtx_range(on: bool):
    """NVTX start/end range 'step_ncu' around one call, for ``ncu --nvtx-include 'regex:step_ncu'``
    (a start/end range also holds the kernels autograd's thread launches)."""
    handle = torch.cuda.nvtx.range_start("step_ncu") if on else None
    try:
        yield
    finally:
        if on:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_end(handle)


def loop(name, a, step, *args):
    """Call ``step(*args)`` a.iters times (the NVTX range around call a.nvtx_step); the result of a call
    becomes the first argument of the next when ``step`` returns a tuple of the same length."""
    t0 = time.perf_counter()
    out = None
    for i in range(a.iters):
        with nvtx_range(a.nvtx_step == i):
            out = step(*args)
        if isinstance(out, tuple) and len(out) == len(args):
            args = out
    if a.device == "cuda":
        torch.cuda.synchronize()
    print(f"{name}: {a.iters} steps {time.perf_counter() - t0:.3f} s", flush=True)
    return out
