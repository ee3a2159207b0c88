"""Roofs measured through MLX: on its GPU (Metal, or MLX's CUDA backend) or on its CPU backend.

Every call is built and evaluated (``mx.eval``) and timed on the wall clock, the stream synchronized at
both ends. Copy: ``-a`` (one read, one write: MLX has no copy a user can call that runs a device
kernel); elementwise: ``a + b``; matrix rates: ``a @ b`` per dtype MLX accepts; the shortest op:
``mx.eval(x + 1)`` on a one-element array.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from datetime import date

from tracekit.calibrate import host
from tracekit.calibrate.figures import Calibration, duration, rate, said
from tracekit.calibrate.timing import Plan, WallClock, grow, sample

GiB, MiB = 1 << 30, 1 << 20
NO_SWITCH = {
    "tf32": "MLX has no tf32 mode to select",
    "fp16_fp16acc": "MLX has no switch for the accumulation type of a float16 matmul",
    "fp8": "MLX has no float8 matmul (mx.to_fp8 converts only)",
}


def gpu_backend(mx) -> str | None:
    """'metal' or 'cuda' when MLX has a GPU here, else None."""
    if mx.metal.is_available():
        return "metal"
    cuda = getattr(mx, "cuda", None)
    return "cuda" if cuda is not None and cuda.is_available() else None


def calibrate(backend: str, quick: bool, progress: Callable[[str], None]) -> Calibration:
    """``mlx``: MLX's GPU where there is one, else its CPU; ``mlx-cpu``: its CPU."""
    import mlx.core as mx

    gpu = gpu_backend(mx) if backend == "mlx" else None
    dev = mx.gpu if gpu else mx.cpu
    cal = _describe(mx, gpu)
    cal.quick = quick
    plan, buffer_why = _plan(mx, gpu, quick)
    clock = WallClock(getattr(mx, "synchronize", lambda: None))
    progress(f"calibrating {cal.device} ({cal.backend}, mlx {mx.__version__}){' --quick' if quick else ''}")
    with mx.stream(dev):
        _bandwidth(mx, clock, plan, buffer_why, cal, progress)
        for key, dtype in (("fp64", mx.float64), ("fp32", mx.float32), ("bf16", mx.bfloat16),
                           ("fp16", mx.float16), ("int8", mx.int8)):
            _matmul(mx, clock, plan, key, dtype, cal, progress)
        x = mx.zeros((1,))
        s = sample(lambda: mx.eval(x + 1), clock, plan)
        cal.add(said(progress, duration(
            "launch.kernel_us", 1, "mx.eval(x + 1) on a one-element array, back to back: MLX's per-op time "
            "(graph build, dispatch" + (", command buffer commit and wait" if gpu else "; no kernel launch on a "
                                        "CPU") + "), the shortest an op takes there", s)))
    for key, reason in NO_SWITCH.items():
        cal.skip(f"peak.{key}", reason)
    if gpu:
        cal.skip("memory.l2_bytes", "MLX does not report the GPU's cache size")
    else:
        host.add_l2(cal)
    cal.leave_out_the_rest("not measured by tracekit calibrate through MLX")
    return cal


def _describe(mx, gpu: str | None) -> Calibration:
    versions = {"python": platform.python_version(), "mlx": mx.__version__}
    if platform.mac_ver()[0]:
        versions["macOS"] = platform.mac_ver()[0]
    if not gpu:
        name = host.cpu_name()
        return Calibration("mlx-cpu", name, "cpu", {"name": name}, versions, str(date.today()), False)
    info = _device_info(mx)
    name = str(info.get("device_name") or info.get("name") or f"MLX {gpu} GPU")
    props = {"name": name}
    if info.get("memory_size"):
        props["totalGlobalMem"] = int(info["memory_size"])
    vendor = "apple" if gpu == "metal" else "nvidia"
    return Calibration(f"mlx-{gpu}", name, vendor, props, versions, str(date.today()), False)


def _device_info(mx) -> dict:
    for get in (getattr(mx, "device_info", None), getattr(mx.metal, "device_info", None)):
        if get is not None:
            try:
                return dict(get())
            except Exception:                      # noqa: BLE001  (older MLX: the next one)
                continue
    return {}


def _plan(mx, gpu: str | None, quick: bool) -> tuple[Plan, str]:
    if gpu:
        mem = int(_device_info(mx).get("memory_size") or 16 * GiB)
        size = 64 * MiB if quick else min(GiB, mem // 16)
        return (Plan(quick, 3 if quick else 10, 0.01 if quick else 0.05, 0.02 if quick else 0.05,
                     256 if quick else 1024, 1024 if quick else 8192, size),
                f"{size // MiB} MiB (device memory / 16, at most 1 GiB)")
    size, why = host.buffer_bytes(quick)
    return (Plan(quick, 3 if quick else 5, 0.01 if quick else 0.2, 0.1 if quick else 0.5,
                 128 if quick else 256, 512 if quick else 4096, size), f"{size // MiB} MiB ({why})")


def _bandwidth(mx, clock, plan: Plan, why: str, cal: Calibration, progress) -> None:
    n = plan.buffer_bytes // 4
    nbytes = n * 4
    a, b = mx.ones((n,)), mx.full((n,), 2.0)
    mx.eval(a, b)
    s = sample(lambda: mx.eval(-a), clock, plan)
    cal.add(said(progress, rate("memory.bandwidth_gbs", 2 * nbytes, 1e9, f"mx.eval(-a), float32 arrays of {why}; "
                                 f"bytes read + written (2 x {nbytes:,} B)", s)))
    s = sample(lambda: mx.eval(a + b), clock, plan)
    cal.add(said(progress, rate("memory.elementwise_gbs", 3 * nbytes, 1e9, f"mx.eval(a + b), float32, "
                                 f"{nbytes:,} B each; bytes read + written (3 x {nbytes:,} B)", s)))


def _matmul(mx, clock, plan: Plan, key: str, dtype, cal: Calibration, progress) -> None:
    def make(n):
        if key == "int8":
            a, b = (mx.random.randint(-128, 128, (n, n)).astype(dtype) for _ in range(2))
        else:
            a, b = (mx.random.normal((n, n)).astype(dtype) for _ in range(2))
        mx.eval(a, b)
        return lambda: mx.eval(a @ b)

    what = f"mx.eval(a @ b), {str(dtype).removeprefix('mlx.core.')}"
    try:
        n, fn = grow(make, clock, plan)
        s = sample(fn, clock, plan)
    except Exception as exc:                       # noqa: BLE001  (the reason goes in the file)
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        cal.skip(f"peak.{key}", f"{what} failed: {type(exc).__name__}: {first}")
        return
    unit = "ops" if key == "int8" else "FLOP"
    cal.add(said(progress, rate(f"peak.{key}", 2 * n ** 3, 1e12, f"{what}, {n}x{n}x{n} (2n^3 = {2 * n ** 3:,} "
                                 f"{unit}), random data", s)))
