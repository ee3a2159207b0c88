"""Record a torch program into a capture bundle (trace.json.gz + meta.json + kernels/).

A ``Session`` owns one torch.profiler run (CPU and, where present, CUDA activities, shapes on) and
marks steps itself with ``ProfilerStep#N`` ranges, so ``load`` finds them. Steps come from one of:
``--step-fn`` (each call), the root ``nn.Module`` (each top-level call starts a step, which runs to
the next one, so backward and optimizer work land in it), the script's own ``torch.profiler``
(kept: its schedule and steps rule) or ``cap.step()`` in the Python API. CUDA graph captures are
bracketed with ``tracekit::graph_capture#G`` ranges and replays with ``tracekit::graph_replay#G``;
a capture made while the profiler is idle (warm-up) is recorded on its own into
``graph_capture_G.json.gz``. ``graphs.map_graph_kernels`` uses both. torch is imported lazily.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path

from tracekit import bundle
from tracekit.capture.distributed import environment_info, process_group_info
from tracekit.capture.environment import describe_environment
from tracekit.capture.progress import StepTicker
from tracekit.capture.own_files import OwnFiles
from tracekit.errors import TracekitError, say_error
from tracekit.outputs import write_atomic
from tracekit.version import __version__

_COMPILE_HOOK_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        say_error(f"tracekit: {msg}\n")


class Session:
    """One capture: profiler on/off by steps, step ranges, graph bracketing, the bundle at the end."""

    def __init__(self, out: Path, *, steps: int | None = None, warmup: int = 0, quiet: bool = False,
                 meta: dict | None = None, execution_trace: bool = True, modules: bool = True) -> None:
        import torch
        from torch.profiler import ProfilerActivity

        if steps is not None and steps < 1:
            raise TracekitError("--steps must be at least 1")
        if warmup < 0:
            raise TracekitError("--warmup must be 0 or more")
        self.torch, self.out, self.steps, self.warmup, self.quiet = torch, Path(out), steps, warmup, quiet
        self.meta = dict(meta or {})
        self.cuda = torch.cuda.is_available()
        self.activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._profile_cls = torch.profiler.profile
        self.prof = None
        self.state = "idle"                    # idle → recording → done
        self.step_rule = "whole script"
        self.begun = 0                         # steps begun so far (warm-up included)
        self.recorded = 0
        self._step_rf = None
        self._t_first = None
        self.first_call_s = None
        self.graphs: list[dict] = []
        self._ticker: StepTicker | None = None
        self.script_traces = 0
        self._undo: list = []
        self._hooks: list = []
        self.kernel_paths: set[str] = set()
        self._thread = threading.get_ident()
        self.finished = False
        self.execution_trace = None            # the ExecutionTraceObserver of the main recording
        self.record_execution_trace = execution_trace
        self.record_modules = modules           # nn.Module events (with_modules): explain --by module
        self.dist_info: dict | None = None     # torch.distributed's rank, world size, backend (once seen)
        self.files = OwnFiles(self.out, lambda msg: _say(False, msg))   # what tracekit itself wrote there

    # profiler -----------------------------------------------------------------------------------
    def _new_profiler(self, execution_trace: bool = False):
        """A profiler with shapes on; with ``execution_trace``, tensor identities are recorded too
        (``torch.profiler.ExecutionTraceObserver``, written to et.json and gzipped at the end)."""
        observer = None
        if execution_trace and self.record_execution_trace and self.execution_trace is None:
            from torch.profiler import ExecutionTraceObserver

            observer = ExecutionTraceObserver().register_callback(str(self.out / "et.json"))
            self.execution_trace = observer
        # nn.Module events come from the profiler's Python tracer: with_modules needs with_stack to write them
        return self._profile_cls(activities=self.activities, record_shapes=True, with_modules=self.record_modules,
                                 with_stack=self.record_modules, execution_trace_observer=observer)

    def start(self) -> None:
        """Install graph bracketing and the naming of Inductor template sources (their profiler ops
        get a ``kernel_file``, so kernels/ keeps them); record from here unless warm-up steps come first."""
        self._patch_graphs()
        if self.cuda:
            from tracekit.capture.inductor_files import name_template_files
            self._undo.append(name_template_files())
        warnings.filterwarnings("ignore", message=_COMPILE_HOOK_WARNING)
        entry = warnings.filters[0]
        self._undo.append(lambda: entry in warnings.filters and warnings.filters.remove(entry))
        if self.warmup == 0:
            self._record()

    def _record(self) -> None:
        if self.state != "idle":
            return
        self.prof = self._new_profiler(execution_trace=True)
        self.prof.start()
        self.state = "recording"
        _say(self.quiet, f"recording (steps: {self.steps or 'all'}, warm-up: {self.warmup})")
        self._ticker = StepTicker(self.quiet, self.steps)          # a live step count, on a terminal only

    def _stop(self) -> None:
        if self.state == "recording" and self.prof is not None:
            self.prof.stop()
        if self._ticker is not None:
            self._ticker.clear()
        self.state = "done"

    # steps ----------------------------------------------------------------------------------------
    def begin_step(self) -> None:
        if threading.get_ident() != self._thread:
            return
        if self.begun == 0:
            self._t_first = time.perf_counter()
        if self.state == "idle" and self.begun >= self.warmup:
            self._record()
        if self.state == "recording":
            self._step_rf = self.torch.profiler.record_function(f"ProfilerStep#{self.begun}")
            self._step_rf.__enter__()
        self.begun += 1

    def end_step(self) -> None:
        if threading.get_ident() != self._thread or self.begun == 0:
            return
        if self.dist_info is None:
            self.snapshot_distributed()
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
            self.recorded += 1
            if self._ticker is not None:
                self._ticker.tick(self.recorded)
            if self.steps is not None and self.recorded >= self.steps:
                self._stop()
                _say(self.quiet, f"recorded {self.recorded} step(s); the script runs on unprofiled")
        if self.begun == 1 and self.first_call_s is None:
            self.first_call_done()

    def first_call_done(self) -> None:
        """Wall time of the first call (compile included), once, after the device finished it."""
        if self._t_first is None or self.first_call_s is not None:
            return
        if self.cuda and self.torch.cuda.is_initialized():
            self.torch.cuda.synchronize()
        self.first_call_s = time.perf_counter() - self._t_first

    def wrap_step_fn(self, fn):
        """``fn`` with each call one step."""
        import functools

        if getattr(fn, "__tracekit_step__", False):
            return fn

        @functools.wraps(fn)
        def step_fn(*args, **kwargs):
            self.begin_step()
            try:
                return fn(*args, **kwargs)
            finally:
                self.end_step()

        step_fn.__tracekit_step__ = True
        return step_fn

    def hook_root_module(self) -> None:
        """Each top-level call of the first root nn.Module called starts a step."""
        from tracekit.capture.root_module import hook_root_module

        def on_root(mod, label):
            self.step_rule = f"module:{label}"
            _say(self.quiet, f"step rule: each call of the root module {label} starts a step")

        def on_enter(mod):
            if self.state != "done":
                self.end_step()
                self.begin_step()

        def on_exit(mod):
            if self.first_call_s is None:
                self.first_call_done()

        self._hooks += hook_root_module(self.torch, lambda: threading.get_ident() == self._thread,
                                        on_root, on_enter, on_exit)

    def snapshot_distributed(self) -> None:
        """Keep the process group's rank, world size and backend while it exists: the profiler starts
        before ``init_process_group`` (Kineto writes no ``distributedInfo``) and the script may
        destroy the group before the trace is written."""
        self.dist_info = process_group_info(self.torch) or self.dist_info

    def distributed_info(self) -> dict | None:
        """``distributedInfo`` (HTA reads the rank there): the group as seen, else RANK/WORLD_SIZE."""
        self.snapshot_distributed()
        return self.dist_info or environment_info()

    # the script's own profiler ------------------------------------------------------------------
    def adopt_script_profiler(self) -> None:
        """Make torch.profiler.profile, while the script runs, record into this bundle."""
        import torch.profiler as tp
        import torch.profiler.profiler as tpp

        session, base = self, self._profile_cls

        class ScriptProfile(base):
            def __init__(self, *args, **kwargs):
                kwargs["activities"], kwargs["record_shapes"] = session.activities, True
                if session.record_modules:
                    kwargs.setdefault("with_modules", True)
                    kwargs.setdefault("with_stack", True)
                self._tk_user_ready = kwargs.pop("on_trace_ready", None)
                super().__init__(*args, on_trace_ready=self._tk_ready, **kwargs)

            def start(self):
                session.hand_over()
                super().start()

            def _tk_ready(self, prof):
                session.script_trace_ready(prof)
                if self._tk_user_ready is not None:
                    self._tk_user_ready(prof)

        ScriptProfile.__name__ = ScriptProfile.__qualname__ = "profile"
        for mod in (tp, tpp):
            mod.profile = ScriptProfile
        self._undo.append(lambda: [setattr(m, "profile", base) for m in (tp, tpp)])

    def hand_over(self) -> None:
        """The script starts its own profiler: drop ours (one Kineto session at a time)."""
        if self.step_rule != "profiler.step":
            _say(self.quiet, "step rule: the script's own torch.profiler (its steps and schedule; "
                             "--steps/--warmup do not apply)")
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
        if self.state == "recording" and self.prof is not None:
            self.prof.stop()
        self.prof, self.state, self.step_rule = None, "done", "profiler.step"
        self._remove_hooks()

    def _remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()

    def script_trace_ready(self, prof) -> None:
        self.script_traces += 1
        if self.script_traces == 1:
            self._export(prof, self.out / "trace.json", main=True)
        else:
            _say(self.quiet, f"the script's profiler made trace #{self.script_traces}; the bundle keeps the first")

    # CUDA graphs --------------------------------------------------------------------------------
    def _patch_graphs(self) -> None:
        if not self.cuda:
            return
        torch, session = self.torch, self
        cls = torch.cuda.CUDAGraph
        orig = {n: getattr(cls, n) for n in ("capture_begin", "capture_end", "replay")}

        def gid_of(graph) -> int:
            if getattr(graph, "_tracekit_gid", None) is None:
                graph._tracekit_gid = len(session.graphs)
                session.graphs.append({"graph": graph._tracekit_gid, "capture": None, "replays": 0})
            return graph._tracekit_gid

        def capture_begin(graph, *args, **kwargs):
            gid = gid_of(graph)
            side = None
            if session.state == "idle" and not torch._C._autograd._profiler_enabled():
                side = session._new_profiler()
                side.start()
            rf = torch.profiler.record_function(f"tracekit::graph_capture#{gid}")
            rf.__enter__()
            graph._tracekit_capture = (rf, side)
            try:
                return orig["capture_begin"](graph, *args, **kwargs)
            except BaseException:
                session._end_capture(graph, gid, ok=False)
                raise

        def capture_end(graph, *args, **kwargs):
            try:
                return orig["capture_end"](graph, *args, **kwargs)
            finally:
                session._end_capture(graph, gid_of(graph), ok=True)

        def replay(graph, *args, **kwargs):
            session.graphs[gid_of(graph)]["replays"] += 1
            if session.state != "recording":
                return orig["replay"](graph, *args, **kwargs)
            with torch.profiler.record_function(f"tracekit::graph_replay#{gid_of(graph)}"):
                return orig["replay"](graph, *args, **kwargs)

        for name, fn in (("capture_begin", capture_begin), ("capture_end", capture_end), ("replay", replay)):
            setattr(cls, name, fn)
        self._undo.append(lambda: [setattr(cls, n, f) for n, f in orig.items()])

    def _end_capture(self, graph, gid: int, ok: bool) -> None:
        rf, side = getattr(graph, "_tracekit_capture", (None, None))
        graph._tracekit_capture = (None, None)
        if rf is not None:
            rf.__exit__(None, None, None)
        where = "trace.json.gz" if self.torch._C._autograd._profiler_enabled() else None
        if side is not None:
            side.stop()
            where = bundle.graph_capture_name(gid) if ok else None
            if ok:
                self._export(side, self.out / bundle.graph_capture_name(gid).removesuffix(".gz"))
        self.graphs[gid]["capture"] = where

    # bundle -------------------------------------------------------------------------------------
    def _export(self, prof, json_path: Path, main: bool = False) -> Path:
        _say(self.quiet, f"writing {json_path.name}.gz")
        self.files.claim(json_path.name), self.files.claim(json_path.name + ".gz")
        prof.export_chrome_trace(str(json_path))
        info = self.distributed_info() if main else None
        gz = bundle.gzip_trace(json_path, self.quiet, self.kernel_paths, {"distributedInfo": info} if info else None)
        self.files.mark(gz.name)
        return gz

    def write_meta(self, state: str) -> None:
        """meta.json: written with ``"state": "running"`` before the script starts (what a killed
        capture leaves), then with ``"state": "done"`` and everything else by ``finish``; atomically."""
        self.meta.update({"tracekit_version": __version__, "state": state})
        self.files.claim(bundle.META)
        write_atomic(self.out / bundle.META, json.dumps(self.meta, indent=1, default=str).encode() + b"\n", "meta.json")
        self.files.mark(bundle.META)

    def _close_execution_trace(self) -> str | None:
        """Finish the execution trace file and gzip it; its bundle name, or None."""
        observer, self.execution_trace = self.execution_trace, None
        if observer is None:
            return None
        try:
            observer.unregister_callback()
        except (RuntimeError, AttributeError):
            pass
        raw = self.out / "et.json"
        if not raw.is_file() or raw.stat().st_size == 0:
            raw.unlink(missing_ok=True)
            return None
        self.files.claim(bundle.EXECUTION_TRACE)
        self.files.mark(name := bundle.gzip_trace(raw, self.quiet, set()).name)
        return name

    def finish(self, exit_code: int) -> Path:
        """Close the open step, stop, write trace.json.gz, kernels/ and meta.json; undo all patches."""
        if self.finished:
            return self.out
        self.finished = True
        if self._step_rf is not None:
            self.end_step()
        self.snapshot_distributed()
        if self.first_call_s is None and self.begun:
            self.first_call_done()
        self._remove_hooks()
        self._stop()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self.files.check()
        trace = self.out / bundle.TRACE
        if not self.files.owns(bundle.TRACE):
            self.files.claim(bundle.TRACE)         # the script's own file of that name is never the trace
        if self.prof is not None and not trace.exists():
            self._export(self.prof, self.out / "trace.json", main=True)
        if not trace.exists():
            _say(False, "warning: nothing was recorded (no step ran after the warm-up?); the bundle has no trace")
        execution_trace = self._close_execution_trace()
        kernel_files = bundle.copy_kernel_files(self.kernel_paths, self.out / bundle.KERNELS)
        self.meta.update(describe_environment(self.torch))
        self.meta.update({
            "tracekit_version": __version__, "step_rule": self.step_rule, "warmup": self.warmup,
            "steps_requested": self.steps, "steps_begun": self.begun, "steps_recorded": self.recorded,
            "first_call_s": self.first_call_s, "exit_code": exit_code, "cuda_graphs": self.graphs,
            "kernel_files": kernel_files, "trace": trace.name if trace.exists() else None,
            "execution_trace": execution_trace, "modules": self.record_modules,
        })
        info = self.distributed_info()
        if info is not None:
            self.meta.update({"rank": info["rank"], "world_size": info["world_size"],
                              "distributed_backend": info["backend"]})
        self.write_meta("done")
        return self.out

