"""Roofs measured through torch on a CUDA (or ROCm) GPU, on Apple's MPS, or on the CPU.

Copy: ``dst.copy_(src)``; elementwise: ``torch.add(a, b, out=c)``; matrix rates: ``a @ b`` per dtype
(fp32 with tf32 off, tf32 on, fp16 with fp16 accumulation where torch has the switch), fp8 through
``torch._scaled_mm``, int8 through ``torch._int_mm``; the shortest kernel: a one-element ``add_``,
a thousand of them in one CUDA graph (on MPS and the CPU: the per-op time, back to back).
"""

from __future__ import annotations

import contextlib
import platform
import time
import warnings
from collections.abc import Callable
from datetime import date

from tracekit.calibrate import host
from tracekit.calibrate.figures import Calibration, Figure, duration, rate, said
from tracekit.calibrate.timing import Plan, WallClock, grow, sample
from tracekit.errors import TracekitError

GiB, MiB = 1 << 30, 1 << 20


def available(torch, backend: str) -> str | None:
    """Why torch cannot run ``backend`` here, or None when it can."""
    if backend == "cuda" and not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    if backend == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        return f"torch {torch.__version__} has no MPS device here (Apple silicon with macOS 12.3+ only)"
    return None


def calibrate(backend: str, quick: bool, progress: Callable[[str], None]) -> Calibration:
    """Measure every roof torch can reach on ``backend`` (cuda, mps or cpu)."""
    import torch

    why = available(torch, backend)
    if why:
        raise TracekitError(f"--device {backend}: {why}")
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "cuda" else torch.device(backend)
    cal = _describe(torch, backend, dev, quick)
    plan, buffer_why = _plan(torch, backend, dev, quick)
    clock = _clock(torch, dev)
    progress(f"calibrating {cal.device} ({backend}, torch {torch.__version__}){' --quick' if quick else ''}")
    _bandwidth(torch, dev, clock, plan, buffer_why, cal, progress)
    _free(torch, dev)                           # the buffers went with _bandwidth's frame
    timed = [_matmul(torch, dev, clock, plan, item, cal, progress) for item in _matmuls(torch, backend, dev)]
    _launch(torch, backend, dev, clock, plan, cal, progress)
    if backend == "cuda":                       # after all timing: a profiler session may leave CUPTI hooks
        for figure, item, n in filter(None, timed):
            _name_kernels(torch, dev, figure, item, n)
    _l2(torch, backend, dev, cal)
    cal.leave_out_the_rest("not measured by tracekit calibrate on this device")
    return cal


def _describe(torch, backend: str, dev, quick: bool) -> Calibration:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    if backend == "cuda":
        p = torch.cuda.get_device_properties(dev)
        hip = getattr(torch.version, "hip", None)
        versions.update({"HIP": hip} if hip else {"CUDA": str(torch.version.cuda)})
        driver = _nvidia_driver()
        if driver:
            versions["driver"] = driver
        props = {"name": p.name, "totalGlobalMem": int(p.total_memory), "computeMajor": p.major,
                 "computeMinor": p.minor, "numSms": p.multi_processor_count}
        return Calibration(backend, p.name, "amd" if hip else "nvidia", props, versions, str(date.today()), quick)
    if backend == "mps":
        versions["macOS"] = platform.mac_ver()[0] or "?"
        name = host.cpu_name()
        return Calibration(backend, name, "apple", {"name": name}, versions, str(date.today()), quick)
    versions["threads"] = str(torch.get_num_threads())
    name = host.cpu_name()
    return Calibration(backend, name, "cpu", {"name": name}, versions, str(date.today()), quick)


def _nvidia_driver() -> str | None:
    try:
        import pynvml  # nvidia-ml-py, where installed

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:                           # noqa: BLE001  (no NVML: the driver is not recorded)
        return None


def _plan(torch, backend: str, dev, quick: bool) -> tuple[Plan, str]:
    if backend == "cuda":
        mem = torch.cuda.get_device_properties(dev).total_memory
        n = 2048 if quick else (8192 if mem >= 16 * GiB else 4096)
        size = 256 * MiB if quick else min(GiB, mem // 16)
        return (Plan(quick, 3 if quick else 10, 0.01 if quick else 0.02, 0.0, n, n, size,
                     rest_s=0.0 if quick else 1.0),
                f"{size // MiB} MiB (min(1 GiB, device memory / 16); the L2 is far smaller)")
    if backend == "mps":
        n = 1024 if quick else 4096
        size = 64 * MiB if quick else min(GiB, (host.memory_bytes() or 16 * GiB) // 16)
        return (Plan(quick, 3 if quick else 10, 0.01 if quick else 0.05, 0.0, n, n, size),
                f"{size // MiB} MiB (unified memory / 16, at most 1 GiB)")
    size, why = host.buffer_bytes(quick)
    return (Plan(quick, 3 if quick else 5, 0.01 if quick else 0.2, 0.1 if quick else 0.5,
                 128 if quick else 256, 512 if quick else 4096, size), f"{size // MiB} MiB ({why})")


def _clock(torch, dev):
    if dev.type == "mps":
        return WallClock(torch.mps.synchronize)
    from tracekit.measure.step import Clock

    return Clock(torch, dev)                    # CUDA events on a GPU, the wall clock on the CPU


def _bandwidth(torch, dev, clock, plan: Plan, why: str, cal: Calibration, progress) -> None:
    n = plan.buffer_bytes // 4
    nbytes = n * 4
    src, other, dst = (torch.ones(n, device=dev), torch.full((n,), 2.0, device=dev),
                       torch.empty(n, device=dev))
    s = sample(lambda: dst.copy_(src), clock, plan)
    cal.add(said(progress, rate("memory.bandwidth_gbs", 2 * nbytes, 1e9, f"dst.copy_(src), fp32 buffers of "
                                 f"{why}; bytes read + written (2 x {nbytes:,} B)", s)))
    s = sample(lambda: torch.add(src, other, out=dst), clock, plan)
    cal.add(said(progress, rate("memory.elementwise_gbs", 3 * nbytes, 1e9, f"torch.add(a, b, out=c), fp32, "
                                 f"{nbytes:,} B each; bytes read + written (3 x {nbytes:,} B)", s)))


def _free(torch, dev) -> None:
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    elif dev.type == "mps":
        torch.mps.empty_cache()


# one matrix-rate item: (key, what it runs, why it cannot run here or None, make(n) -> call, settings)
Item = tuple


def _matmuls(torch, backend: str, dev) -> list[Item]:
    cuda, hip = backend == "cuda", bool(getattr(torch.version, "hip", None))
    fp16_switch = hasattr(torch.backends.cuda.matmul, "allow_fp16_accumulation")
    cap = torch.cuda.get_device_capability(dev) if cuda else None

    def mm(dtype):
        def make(n):
            a, b = (torch.randn(n, n, device=dev).to(dtype) for _ in range(2))
            return lambda: torch.matmul(a, b)
        return make

    def scaled(n):
        f8 = torch.float8_e4m3fnuz if hip else torch.float8_e4m3fn
        a = torch.randn(n, n, device=dev).to(f8)
        b = torch.randn(n, n, device=dev).to(f8).t()          # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def int8(n):
        a, b = (torch.randint(-128, 128, (n, n), dtype=torch.int8, device=dev) for _ in range(2))
        return lambda: torch._int_mm(a, b)

    no_tf32 = ("on ROCm tracekit cannot tell xf32 from fp32 (torch may run either)" if hip else
               None if cuda else f"tf32 is an NVIDIA tensor-core mode; torch on {backend} has none to select")
    no_acc = (f"torch has no switch for fp16 accumulation on {backend}" if not cuda else
              "on ROCm torch.backends.cuda.matmul.allow_fp16_accumulation is not known to apply" if hip else
              None if fp16_switch else
              f"torch {torch.__version__} has no torch.backends.cuda.matmul.allow_fp16_accumulation")
    no_fp8 = (f"fp8 matmul needs compute capability 8.9+ (this device: {cap[0]}.{cap[1]})"
              if cuda and not hip and cap < (8, 9) else
              "MPS has no float8 matmul" if backend == "mps" else None)
    return [
        ("fp64", "torch.matmul float64", "MPS has no float64" if backend == "mps" else None,
         mm(torch.float64), {}),
        ("fp32", "torch.matmul float32, tf32 off (float32 matmul precision 'highest')", None,
         mm(torch.float32), {"precision": "highest"}),
        ("tf32", "torch.matmul float32 with tf32 (float32 matmul precision 'high')", no_tf32,
         mm(torch.float32), {"precision": "high"}),
        ("bf16", "torch.matmul bfloat16 (fp32 accumulation)", None, mm(torch.bfloat16), {}),
        ("fp16", "torch.matmul float16 (fp32 accumulation)", None, mm(torch.float16), {}),
        ("fp16_fp16acc", "torch.matmul float16, torch.backends.cuda.matmul.allow_fp16_accumulation = True",
         no_acc, mm(torch.float16), {"fp16_acc": True}),
        ("fp8", "torch._scaled_mm float8_e4m3 x float8_e4m3 -> bfloat16, unit scales", no_fp8, scaled, {}),
        ("int8", "torch._int_mm int8 x int8 -> int32", None, int8, {}),
    ]


@contextlib.contextmanager
def _settings(torch, precision: str = "highest", fp16_acc: bool = False):
    """torch's matmul switches for one item, put back afterwards (tests run in process)."""
    old_precision = torch.get_float32_matmul_precision()
    matmul = torch.backends.cuda.matmul
    old_acc = getattr(matmul, "allow_fp16_accumulation", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # newer torch suggests its fp32_precision API
        torch.set_float32_matmul_precision(precision)
        if fp16_acc:
            matmul.allow_fp16_accumulation = True
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(old_precision)
            if fp16_acc:
                matmul.allow_fp16_accumulation = old_acc


def _matmul(torch, dev, clock, plan: Plan, item: Item, cal: Calibration, progress) -> tuple | None:
    """Time one matrix item into ``cal``; (figure, item, n) when it ran, else None (the reason skipped)."""
    key, what, why_not, make, settings = item
    if why_not:
        cal.skip(f"peak.{key}", why_not)
        return None
    try:
        with _settings(torch, **settings):
            n, fn = grow(make, clock, plan)
            time.sleep(plan.rest_s)
            s = sample(fn, clock, plan)
    except Exception as exc:                             # noqa: BLE001  (the reason goes in the file)
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        cal.skip(f"peak.{key}", f"{what} failed on {dev.type}: {type(exc).__name__}: {first}")
        _free(torch, dev)
        return None
    work = f"{what}, {n}x{n}x{n} (2n^3 = {2 * n ** 3:,} {'ops' if key == 'int8' else 'FLOP'}), random data"
    figure = rate(f"peak.{key}", 2 * n ** 3, 1e12, work, s)
    cal.add(said(progress, figure))
    del fn
    _free(torch, dev)
    return figure, item, n


def _name_kernels(torch, dev, figure: Figure, item: Item, n: int) -> None:
    """Add to the figure's source the GPU kernels one call runs (torch.profiler), when it can say."""
    _, _, _, make, settings = item
    try:
        from torch.profiler import ProfilerActivity, profile

        with _settings(torch, **settings):
            fn = make(n)
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events()             # device-side events: the kernels
                        if str(getattr(e, "device_type", "")).endswith("CUDA") or getattr(e, "device_time", 0) > 0})
    except Exception:                                    # noqa: BLE001  (no names: the figure stands)
        names = []
    if names:
        figure.extra = "kernels: " + ", ".join(name[:90] for name in names[:3])
    _free(torch, dev)


def _launch(torch, backend: str, dev, clock, plan: Plan, cal: Calibration, progress) -> None:
    x = torch.zeros(1, device=dev)
    eager = sample(lambda: x.add_(1), clock, plan)
    if backend != "cuda":
        what = (f"x.add_(1) on a one-element tensor, back to back: torch's per-op time on {backend} (host "
                "dispatch" + (" and command encoding" if backend == "mps" else "; no kernel launch on a CPU")
                + "), the shortest an op takes there")
        cal.add(said(progress, duration("launch.kernel_us", 1, what, eager)))
        return
    k = plan.graph_kernels
    try:
        graph = _graph_of(torch, lambda: x.add_(1), k)
    except Exception as exc:                             # noqa: BLE001
        cal.skip("launch.kernel_us", f"a CUDA graph could not be captured: {type(exc).__name__}: {exc}")
        return
    s = sample(graph.replay, clock, plan)
    cal.add(said(progress, duration(
        "launch.kernel_us", k, f"one-element add_ kernels, {k} captured in one CUDA graph and replayed; "
        "device time per kernel (launch, run, teardown)", s,
        f"eager launches from Python back to back come one every {eager.median_s * 1e6:.3g} us "
        "(the host's launch rate, CUDA events)")))


def _graph_of(torch, fn, k: int):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(k):
            fn()
    return graph


def _l2(torch, backend: str, dev, cal: Calibration) -> None:
    if backend == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
        if l2:
            cal.add(Figure("memory.l2_bytes", l2, "device", "torch.cuda.get_device_properties().L2_cache_size"))
        else:
            cal.skip("memory.l2_bytes", "torch reports no L2_cache_size for this device")
    elif backend == "mps":
        cal.skip("memory.l2_bytes", "torch does not report the Apple GPU's cache size")
    else:
        host.add_l2(cal)

