"""Energy per step from NVML's energy counter over a window of at least one second.

NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded) is
updated every 20–100 ms, and its power reading (``nvmlDeviceGetPowerUsage``) is a 1 s average: a window
shorter than a second is refused up front (``MIN_WINDOW_S``) and one that came out shorter is flagged.
The step is repeated back to back until the window is long enough; J per step is the energy difference
over the calls, W the energy over the window's wall time (device synchronized at both ends).
"""

from __future__ import annotations

import math
import platform
import time

from tracekit.errors import TracekitError

MIN_WINDOW_S = 1.0
APPLE_HOW = ("Apple GPUs: NVML does not exist there; run `sudo powermetrics --samplers gpu_power,cpu_power "
             "-i 1000` alongside a long continuous run of the step and divide the GPU/CPU energy over the "
             "window by the calls made (tracekit does not read powermetrics)")


def check_window(window_s: float) -> None:
    if not (math.isfinite(window_s) and window_s >= MIN_WINDOW_S):
        raise TracekitError(f"--energy-window {window_s:g}: refused: NVML's energy counter updates every "
                            f"20-100 ms and its power readings are 1 s averages; use a window of at least "
                            f"{MIN_WINDOW_S:g} s")


class Nvml:
    """The NVML handle of one CUDA device, and the readings tracekit records."""

    def __init__(self, torch, device):
        import pynvml                                       # nvidia-ml-py

        self.nv = pynvml
        pynvml.nvmlInit()
        self.handle = self._handle(torch, device)

    def _handle(self, torch, device):
        nv = self.nv
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
        if uuid is not None:
            try:
                return nv.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
            except Exception:                               # noqa: BLE001  (then by index)
                pass
        return nv.nvmlDeviceGetHandleByIndex(device.index or 0)

    def energy_mj(self) -> int:
        return int(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def sample(self) -> dict:
        """Clocks (MHz), power (W, NVML's 1 s average), temperature, clock-event reasons, where readable."""
        nv, h, out = self.nv, self.handle, {}
        reads = {"sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                 "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                 "graphics_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_GRAPHICS),
                 "power_w": lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3,
                 "temperature_c": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                 "clock_event_reasons": lambda: hex(nv.nvmlDeviceGetCurrentClocksEventReasons(h))}
        for key, read in reads.items():
            try:
                out[key] = read()
            except Exception:                               # noqa: BLE001  (NVMLError, an old binding)
                out[key] = None
        return out

    def limits(self) -> dict:
        nv, h, out = self.nv, self.handle, {}
        reads = {"name": lambda: nv.nvmlDeviceGetName(h),
                 "power_limit_w": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
                 "max_sm_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
                 "max_mem_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM),
                 "driver_version": lambda: nv.nvmlSystemGetDriverVersion()}
        for key, read in reads.items():
            try:
                value = read()
                out[key] = value.decode() if isinstance(value, bytes) else value
            except Exception:                               # noqa: BLE001
                out[key] = None
        return out


def open_nvml(torch, device) -> tuple[Nvml | None, str | None]:
    """NVML for the step's device, or None and why not."""
    if device.type != "cuda":
        if platform.system() == "Darwin":
            return None, APPLE_HOW
        return None, "the step runs on the CPU: NVML reads NVIDIA GPUs only (no CPU energy counter is read)"
    if getattr(torch.version, "hip", None):
        return None, "ROCm device: NVML does not apply (amd-smi's energy counter is not read by tracekit)"
    try:
        return Nvml(torch, device), None
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py"
    except Exception as exc:                                 # noqa: BLE001  (NVMLError and friends)
        return None, f"NVML is not usable here: {type(exc).__name__}: {exc}"


def measure_energy(run_calls, sync, nvml, window_s: float, seconds_per_call: float,
                   tokens_per_step: float | None = None, tries: int = 3) -> dict:
    """Repeat the step (``run_calls(n)`` makes n calls back to back) for ``window_s`` or more between two
    synchronized readings of the energy counter; retry with more calls when the window came out short."""
    check_window(window_s)
    calls = max(1, math.ceil(window_s / max(seconds_per_call, 1e-7) * 1.05))
    before = nvml.limits()
    for attempt in range(1, tries + 1):
        sync()
        e0, t0 = nvml.energy_mj(), time.perf_counter()
        run_calls(calls // 2)
        middle = nvml.sample()
        run_calls(calls - calls // 2)
        end = nvml.sample()
        sync()
        e1, t1 = nvml.energy_mj(), time.perf_counter()
        wall = t1 - t0
        if wall >= window_s or attempt == tries:
            break
        calls = max(calls + 1, math.ceil(calls * window_s / max(wall, 1e-6) * 1.1))
    joules = (e1 - e0) / 1e3
    flags = []
    if wall < MIN_WINDOW_S:
        flags.append(f"window {wall:.3f} s < {MIN_WINDOW_S:g} s: NVML's counter and power readings are too "
                     "coarse for it")
    if joules <= 0:
        flags.append("the energy counter did not advance over the window")
    out = {"available": True, "method": "nvmlDeviceGetTotalEnergyConsumption difference over a synchronized "
           "window of back-to-back calls", "window_s": wall, "window_asked_s": window_s, "calls": calls,
           "attempts": attempt, "joules": joules, "j_per_step": joules / calls, "avg_w": joules / wall if wall else None,
           "window_ok": not flags, "flags": flags, "device": before,
           "samples": {"middle": middle, "end": end}}
    if tokens_per_step:
        out["tokens_per_step"] = tokens_per_step
        out["tok_per_j"] = tokens_per_step / out["j_per_step"] if out["j_per_step"] > 0 else None
        out["tok_per_s"] = tokens_per_step * calls / wall if wall else None
    return out
