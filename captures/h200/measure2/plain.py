"""The independent energy figure: a plain `for` loop of the step between two readings of NVML's energy
counter (nvmlDeviceGetTotalEnergyConsumption, mJ), the device synchronized at both ends; no tracekit.

windows(call, n_windows, window_s): after 3 warm-up calls, 10 calls size the window (enough calls for
window_s); then n_windows windows of that many calls, each read on its own."""
import math
import time

import pynvml
import torch


def _nvml():
    pynvml.nvmlInit()
    uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
    try:
        return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    except Exception:                       # noqa: BLE001
        return pynvml.nvmlDeviceGetHandleByIndex(0)


def windows(call, n_windows=5, window_s=2.0):
    h = _nvml()
    sync = torch.cuda.synchronize
    for _ in range(3):
        call()
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        call()
    sync()
    per = (time.perf_counter() - t0) / 10
    n = max(1, math.ceil(window_s / per))
    out = []
    for _ in range(n_windows):
        sync()
        e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        for _ in range(n):
            call()
        sync()
        e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        j, wall = (e1 - e0) / 1e3, t1 - t0
        out.append({"calls": n, "wall_s": wall, "joules": j, "j_per_call": j / n, "us_per_call": wall / n * 1e6,
                    "avg_w": j / wall, "temperature_c": pynvml.nvmlDeviceGetTemperature(h, 0),
                    "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)})
    return {"sizing_us_per_call": per * 1e6, "calls_per_window": n, "window_s_asked": window_s, "windows": out}


def profile_a_few(call, steps=5):
    """What `tracekit measure`'s ① scope does to the process: a torch.profiler run (CPU + CUDA, shapes)
    of a few calls, then stopped. Kineto leaves CUPTI attached afterwards unless TEARDOWN_CUPTI=1."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True):
        for _ in range(steps):
            call()
        torch.cuda.synchronize()
