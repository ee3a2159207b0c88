"""Facts about the host CPU read from the system (Linux sysfs and /proc; elsewhere what Python knows)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from tracekit.calibrate.figures import Calibration, Figure

SYS_CPU = Path("/sys/devices/system/cpu")


def cpu_name() -> str:
    """'model name' from /proc/cpuinfo, sysctl's brand string on macOS, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name") and ":" in line:
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    if sys.platform == "darwin":                # "Apple M5 Pro": the name the builtin Apple specs match
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 check=False, timeout=5).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _size(text: str) -> int | None:
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    except (ValueError, KeyError):
        return None


def caches(root: Path = SYS_CPU) -> dict[int, tuple[int, int]]:
    """{level: (total bytes, instances)} over the data/unified caches of every CPU, each shared cache
    counted once (by its shared_cpu_list); {} where sysfs has none (macOS, containers hiding it)."""
    seen: dict[tuple[int, str], int] = {}
    for index in root.glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            seen[(level, shared)] = size
    out: dict[int, tuple[int, int]] = {}
    for (level, _), size in seen.items():
        total, count = out.get(level, (0, 0))
        out[level] = (total + size, count + 1)
    return out


def memory_bytes() -> int | None:
    """Physical memory, where the OS says."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def buffer_bytes(quick: bool) -> tuple[int, str]:
    """Bytes per copy/elementwise buffer on the CPU: twice the largest cache level (so the stream
    cannot stay in cache), at least 256 MiB, at most 1/8 of memory; --quick: 32 MiB."""
    if quick:
        return 32 << 20, "--quick: may sit in a large last-level cache"
    levels = caches()
    largest = max((total for total, _ in levels.values()), default=0)
    size = max(2 * largest, 256 << 20)
    mem = memory_bytes()
    if mem:
        size = min(size, mem // 8)
    why = f"twice the largest cache ({largest >> 20} MiB)" if 2 * largest >= 256 << 20 else "256 MiB"
    return size, why


def add_l2(cal: Calibration) -> None:
    """The host's L2 (every instance together, as lscpu counts it) into ``cal``, or why not."""
    levels = caches()
    if 2 in levels:
        total, count = levels[2]
        cal.add(Figure("memory.l2_bytes", total, "device", f"sysfs: L2 data/unified caches, {count} "
                       f"instance(s), {total:,} B together"))
    else:
        cal.skip("memory.l2_bytes", "the system does not list the CPU's L2 cache (no sysfs cache entries)")
