"""``tracekit measure script.py [-- args]``: run the script as ``tracekit capture`` does (same step rules,
same machinery: ``capture.runner``, ``capture.script.install_step_fn``) and, at the step's first call,
measure it in every scope; then the script goes on unmeasured and its exit code becomes ours.

With ``--step-fn`` the measured unit is one call of that function (the first call is the first-call scope,
the repeats follow at once). Without it, it is one call of the root ``nn.Module`` (the first module called
at top level): its first call is timed through forward hooks, and the repeats happen at its second call,
whose arguments (keywords too) the module's ``forward`` is wrapped to see. What runs between two module
calls (backward, the optimizer) is not repeated: use ``--step-fn`` for a whole training step.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.capture.runner import load_script, run_script
from tracekit.capture.root_module import hook_root_module
from tracekit.capture.script import (WRAP_NAME, bundle_on_every_exit, end_if_a_thread_exited, install_step_fn,
                                     is_mlx_script)
from tracekit.errors import TracekitError, say_error

MLX_HOW = ("MLX scripts are not measured by tracekit measure: time `mx.eval(step(...))` with "
           "time.perf_counter around it (mx.eval waits for the GPU), and use powermetrics for energy "
           "(docs/measure.md)")


@dataclass
class Options:
    """What ``tracekit measure`` was asked (the CLI fills it; tests build it directly)."""

    step_fn: str | None = None
    out: str | None = None
    warmup: int = 3
    repeats: int = 10
    calls: int | None = None              # back-to-back calls per continuous repeat (None: fill target_s)
    target_s: float = 0.05
    profile_steps: int = 5                # hot steps; as many cold
    profile: bool = True
    graph: bool = True
    floor_us: float | None = None
    device: str | None = None
    spec: str | None = None
    energy: bool = True
    energy_window_s: float = 2.0
    tokens_per_step: float | None = None
    reset_args: str = "auto"
    keep_trace: str | None = None
    flush_bytes: int | None = None        # buffer written before each cold step (default: twice the cache)
    quiet: bool = False
    force: bool = False                   # replace existing -o files and a --keep-trace bundle
    command: list = field(default_factory=list)


class Measurer:
    """Duck-types the part of ``capture.session.Session`` that ``install_step_fn`` uses (``step_rule``,
    ``wrap_step_fn``); measures the first step call it sees on the script's thread."""

    def __init__(self, options: Options):
        self.options = options
        self.step_rule = "none"
        self.result: dict | None = None
        self.busy = False
        self.done = False
        self.first_call_s: float | None = None
        self._thread = threading.get_ident()
        self._hooks: list = []

    def _mine(self) -> bool:
        return not (self.done or self.busy) and threading.get_ident() == self._thread

    def wrap_step_fn(self, fn):
        if getattr(fn, "__tracekit_step__", False):
            return fn

        @functools.wraps(fn)
        def step_fn(*args, **kwargs):
            if not self._mine():
                return fn(*args, **kwargs)
            return self._measure(fn, args, kwargs, first_call_s=None, final=fn)

        step_fn.__tracekit_step__ = True
        return step_fn

    def _measure(self, fn, args, kwargs, first_call_s, final, module=None):
        from tracekit.measure.report import write_outputs
        from tracekit.measure.run import measure_step

        self.busy = True
        self.remove_hooks()          # the global module hooks run at every submodule call: not while measuring
        try:
            step, self.result = measure_step(fn, args, kwargs, self.options, first_call_s, final,
                                             step_rule=self.step_rule, module=module)
            write_outputs(self.result, self.options, show=False)     # kept even if the script dies later
            step.prep()
            return final(*args, **kwargs)                            # the call the script sees
        finally:
            self.busy, self.done = False, True
            self.remove_hooks()

    def hook_root_module(self) -> None:
        """Time the root module's first top-level call; measure at its second (see the module docstring)."""
        import torch

        t0 = []

        def sync():
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()

        def on_root(mod, label):
            self.step_rule = f"module:{label}"

        def on_enter(mod):
            if self.first_call_s is None:
                sync()
                t0[:] = [time.perf_counter()]

        def on_exit(mod):
            if self.first_call_s is None and t0:
                sync()
                self.first_call_s = time.perf_counter() - t0[0]
                self._wrap_forward(mod)

        self._hooks += hook_root_module(torch, self._mine, on_root, on_enter, on_exit)

    def _wrap_forward(self, root) -> None:
        had_own = "forward" in root.__dict__
        original = root.forward

        def forward(*args, **kwargs):
            if not self._mine():
                return original(*args, **kwargs)
            if had_own:
                root.forward = original
            else:
                del root.forward
            return self._measure(lambda *a, **k: root(*a, **k), args, kwargs, self.first_call_s, original,
                                 module=root)

        root.forward = forward

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()


def measure_script(script: str, args: list[str], options: Options) -> int:
    """Run ``python script args`` measuring its step; writes OUT.json and OUT.md; the script's exit code."""
    path, source, code = load_script(script)
    if is_mlx_script(source):
        raise TracekitError(f"{script}: {MLX_HOW}")
    if importlib.util.find_spec("torch") is None:
        raise TracekitError("torch is not installed: measure needs it (pip install 'tracekit[capture]')")
    from tracekit.measure.energy import check_window
    from tracekit.measure.report import write_outputs

    if options.energy:
        check_window(options.energy_window_s)
    if options.reset_args not in ("auto", "on", "off"):
        raise TracekitError(f"--reset-args {options.reset_args!r}: expected auto, on or off")
    for name, value in (("--floor-us", options.floor_us), ("--tokens-per-step", options.tokens_per_step)):
        if value is not None and not 0 < value <= 1e15:        # inf, nan, 0 and negatives fail this
            raise TracekitError(f"{name} {value}: must be a finite number above 0")
    for name in ("warmup", "repeats", "profile_steps"):
        if getattr(options, name) < (0 if name == "warmup" else 1):
            raise TracekitError(f"--{name.replace('_', '-')} {getattr(options, name)}: too small")
    out = Path(options.out or f"{path.stem}.measure.json").absolute()
    options.out = str(out.with_suffix(".json") if out.suffix != ".json" else out)
    _check_outputs(options, [path, options.spec])
    options.command = options.command or [sys.executable, "-m", "tracekit", "measure", script, *args]
    measurer = Measurer(options)
    saved_path = sys.path[:]
    sys.path[0:1] = [str(path.resolve().parent)]
    try:
        code = install_step_fn(measurer, options.step_fn, path, source, code) if options.step_fn else code
    finally:
        sys.path[:] = saved_path
    if not options.step_fn:
        measurer.hook_root_module()
    def finish(exit_code: int) -> None:
        if measurer.result is not None:
            measurer.result["script"] = {"path": str(path.resolve()), "args": list(args), "exit_code": exit_code}
            write_outputs(measurer.result, options, show=not options.quiet)

    with bundle_on_every_exit(finish) as exits:
        exit_code = run_script(code, path, [script, *args], {WRAP_NAME: measurer.wrap_step_fn})
    measurer.remove_hooks()
    if "code" in exits:                   # a thread's os._exit: write what there is, end now
        finish(exit_code)
        end_if_a_thread_exited(exits)
    if measurer.result is None:
        what = ("the root nn.Module was called at most once (measure repeats it at its second call; "
                "or give --step-fn)" if measurer.first_call_s is not None
                else f"no call of {options.step_fn}" if options.step_fn else "no step ran (no root nn.Module "
                "call; try --step-fn module:function)")
        if exit_code:
            say_error(f"tracekit: nothing measured: {what}; script exit code {exit_code}\n")
            return exit_code
        raise TracekitError(f"nothing measured: {what}")
    finish(exit_code)
    return exit_code


def _check_outputs(options: Options, inputs: list) -> None:
    """OUT.json, OUT.md and the --keep-trace bundle checked before the script runs (tracekit.outputs)."""
    from tracekit import bundle
    from tracekit.outputs import check_not_input, check_output_file

    out = Path(options.out)
    for target in (out, out.with_suffix(".md")):
        check_output_file(target, "-o", inputs, options.force, make_parents=True)
    if options.keep_trace:
        check_not_input(options.keep_trace, "--keep-trace", inputs + [out, out.with_suffix(".md")])
        bundle.prepare_out(options.keep_trace, options.force)
