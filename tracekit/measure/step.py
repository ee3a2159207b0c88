"""The step being measured: the callable, its arguments, what it mutates, and the clock of its device.

``Step.run()`` is one call; ``Step.prep()`` copies back the tensor arguments being reset (see
``detect_mutation``); ``Step.call()`` is both. ``Clock`` times on CUDA events (device time) where the step
runs on a CUDA device and on the wall clock (``time.perf_counter``) elsewhere; ``sync`` waits for the
device.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SNAPSHOT_LIMIT = 1 << 30          # tensor arguments past 1 GiB together are not snapshotted (said)


def tensors_in(torch, args: tuple, kwargs: dict) -> list[tuple[str, object]]:
    """(name, tensor) of the step's tensor arguments: top-level, or one level inside a list, tuple or dict."""
    found = []

    def visit(name, value, depth=0):
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif depth == 0 and isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                visit(f"{name}[{i}]", v, 1)
        elif depth == 0 and isinstance(value, dict):
            for k, v in value.items():
                visit(f"{name}[{k!r}]", v, 1)

    for i, a in enumerate(args):
        visit(f"arg{i}", a)
    for k, v in kwargs.items():
        visit(k, v)
    return found


def modules_in(torch, args: tuple, kwargs: dict) -> list:
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.nn.Module)]


def describe(t) -> dict:
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "device": str(t.device),
            "bytes": t.numel() * t.element_size()}


class Step:
    """One step call, repeatable: ``fn(*args, **kwargs)``."""

    def __init__(self, torch, fn, args: tuple, kwargs: dict, reset: str = "auto", module=None):
        self.torch, self.fn, self.args, self.kwargs, self.reset_mode = torch, fn, args, kwargs, reset
        self.tensors = tensors_in(torch, args, kwargs)
        self.modules = modules_in(torch, args, kwargs) + ([module] if module is not None else [])
        self.device = self._device()
        self.before: list | None = None          # clones of the tensor arguments before the first call
        self.resets: list[tuple] = []            # (tensor, clone) copied back before each call
        self.mutated: list[str] = []
        self.notes: list[str] = []

    def _device(self):
        for _, t in self.tensors:
            if t.device.type == "cuda":
                return t.device
        for m in self.modules:
            for p in m.parameters():
                return p.device if p.device.type == "cuda" else self.torch.device("cpu")
        torch = self.torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def snapshot(self) -> None:
        """Clone the tensor arguments (before the first measured call)."""
        total = sum(t.numel() * t.element_size() for _, t in self.tensors)
        if total > SNAPSHOT_LIMIT:
            self.notes.append(f"tensor arguments hold {total} bytes (> 1 GiB): not snapshotted, so neither "
                              "checked for changes nor reset")
            return
        with self.torch.no_grad():
            self.before = [t.detach().clone() for _, t in self.tensors]

    def detect_mutation(self) -> None:
        """After the first call: which tensor arguments it changed; choose what to reset before each call
        (``auto``: the changed ones; ``on``: all; ``off``: none)."""
        if self.before is None:
            return
        with self.torch.no_grad():
            self.mutated = [n for (n, t), b in zip(self.tensors, self.before)
                            if t.shape != b.shape or not self.torch.equal(t, b)]
        pick = {"auto": set(self.mutated), "on": {n for n, _ in self.tensors}, "off": set()}[self.reset_mode]
        self.resets = [(t, b) for (n, t), b in zip(self.tensors, self.before) if n in pick and t.shape == b.shape]
        if self.mutated and self.reset_mode == "off":
            self.notes.append(f"the step changes its argument(s) {', '.join(self.mutated)} and --reset-args off "
                              "leaves them changing from call to call")

    def prep(self) -> None:
        if self.resets:
            with self.torch.no_grad():
                for t, b in self.resets:
                    t.copy_(b)

    def run(self):
        return self.fn(*self.args, **self.kwargs)

    def call(self):
        self.prep()
        return self.run()

    def reset_info(self) -> dict:
        names = {id(t): n for n, t in self.tensors}
        return {"mode": self.reset_mode, "mutated_by_first_call": self.mutated,
                "reset_before_each_call": [names[id(t)] for t, _ in self.resets],
                "reset_bytes_per_call": sum(t.numel() * t.element_size() for t, _ in self.resets)}

    def clear_grads(self) -> None:
        """Drop parameters' .grad (after a failed graph capture they point into the discarded graph's memory)."""
        for m in self.modules:
            for p in m.parameters():
                p.grad = None


class Clock:
    """Device time between two marks: CUDA events on a CUDA device, the wall clock elsewhere."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.cuda = device.type == "cuda"
        self.kind = "CUDA events (device time)" if self.cuda else "wall clock (time.perf_counter)"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def start(self):
        if not self.cuda:
            return time.perf_counter()
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, mark) -> float:
        """Seconds since ``mark`` (waits for the device)."""
        if not self.cuda:
            return time.perf_counter() - mark
        end = self.torch.cuda.Event(enable_timing=True)
        end.record()
        end.synchronize()
        return mark.elapsed_time(end) / 1e3


def batch_times(fn, clock, repeats: int, calls: int) -> list[float]:
    """Seconds per call of ``fn``: ``repeats`` batches of ``calls`` back-to-back calls, each batch timed
    as a whole (the device synchronized before it, waited for at its end). ``clock``: a ``Clock`` or
    anything with its sync/start/stop."""
    times = []
    for _ in range(repeats):
        clock.sync()
        mark = clock.start()
        for _ in range(calls):
            fn()
        times.append(clock.stop(mark) / calls)
    return times


def cache_bytes(torch, device, spec_l2: int | None) -> tuple[int, str]:
    """The cache to flush for the cold scope, and where its size came from."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 0
        if l2:
            return int(l2), "torch device properties (L2_cache_size)"
        if spec_l2:
            return int(spec_l2), "the device spec's l2_bytes"
        return 64 << 20, "unknown L2 size: 64 MiB assumed"
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        try:
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[text[-1]]
                         if text[-1] in "KMG" else int(text))
        except (ValueError, KeyError):
            continue
    if sizes:
        return max(sizes), "the largest CPU cache in /sys/devices/system/cpu/cpu0/cache"
    return (32 << 20), f"CPU cache size unknown on {os.uname().sysname}: 32 MiB assumed"
