"""``tracekit capture script.py [-- args]``: run a script as ``python script.py args`` would, profiled.

The script runs in this process as ``__main__`` (same argv, cwd and ``sys.path[0]`` as python would
give it, like ``runpy.run_path(run_name="__main__")``); its output is untouched and its exit code
becomes ours (an uncaught exception: traceback on stderr, exit 1). torch is imported only once a
torch script is about to run, so importing this module stays cheap.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import re
import signal
import sys
import threading
import types
from pathlib import Path

from tracekit import bundle
from tracekit.capture.runner import load_script, run_script
from tracekit.capture.session import Session
from tracekit.errors import TracekitError, say_error

_MLX_IMPORT = re.compile(r"^\s*(import\s+mlx\b|from\s+mlx\b)", re.M)
_TORCH_IMPORT = re.compile(r"^\s*(import\s+torch\b|from\s+torch\b)", re.M)
WRAP_NAME = "__tracekit_step_wrap__"


def is_mlx_script(source: str) -> bool:
    return bool(_MLX_IMPORT.search(source)) and not _TORCH_IMPORT.search(source)


def wrap_in_script(source: str, path: Path, target: str) -> types.CodeType | None:
    """Recompile the script so that, right after ``def fn`` (or ``class C`` for ``C.fn``) runs at
    module level, the function is replaced by its step wrapper; a function the script imports
    (``from steps import fn``) or assigns (``fn = make_step()``) is wrapped right after that statement.
    None when the script binds no such name."""
    tree = ast.parse(source, str(path))
    owner, _, attr = target.rpartition(".")
    found = False

    def after(node: ast.stmt) -> list[ast.stmt]:
        nonlocal found
        if not owner and (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == attr
                          or attr in _bound_names(node)):
            stmt = f"{attr} = {WRAP_NAME}({attr})"
        elif owner and isinstance(node, ast.ClassDef) and node.name == owner:
            stmt = f"{owner}.{attr} = {WRAP_NAME}({owner}.__dict__[{attr!r}])"
        else:
            return []
        found = True
        extra = ast.parse(stmt).body
        for n in extra:
            ast.copy_location(n, node)
            ast.fix_missing_locations(n)
        return extra

    def walk(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for node in body:
            for field in ("body", "orelse", "finalbody"):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                        isinstance(getattr(node, field, None), list) and getattr(node, field):
                    setattr(node, field, walk(getattr(node, field)))
            for handler in getattr(node, "handlers", []) or []:
                handler.body = walk(handler.body)
            out += [node, *after(node)]
        return out

    tree.body = walk(tree.body)
    return compile(tree, str(path.resolve()), "exec", dont_inherit=True) if found else None


def _bound_names(node: ast.stmt) -> set[str]:
    """Names a module-level import or plain assignment binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


def install_step_fn(session, spec: str, path: Path, source: str, code: types.CodeType):
    """Wrap ``module:function`` (``module:Class.method``) so that each call is one step; returns the
    code to run (recompiled when the function lives in the script itself)."""
    mod_name, sep, target = spec.partition(":")
    if not sep or not mod_name or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", target):
        raise TracekitError(f"--step-fn {spec!r}: expected module:function or module:Class.method")
    session.step_rule = f"step-fn:{spec}"
    if mod_name in ("__main__", path.stem):
        new = wrap_in_script(source, path, target)
        if new is None:
            raise TracekitError(f"--step-fn {spec!r}: {path.name} defines no {target} at module level")
        return new
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as exc:
        raise TracekitError(f"--step-fn {spec!r}: cannot import {mod_name} ({exc})") from None
    *owners, attr = target.split(".")
    for name in owners:
        obj = getattr(obj, name, None)
    fn = getattr(obj, attr, None) if obj is not None else None
    if not callable(fn):
        raise TracekitError(f"--step-fn {spec!r}: {mod_name} has no function {target}")
    setattr(obj, attr, session.wrap_step_fn(fn))
    return code


class ScriptTerminated(SystemExit):
    """SIGTERM/SIGHUP while the script runs: unwind it so the bundle is still written."""


@contextlib.contextmanager
def bundle_on_every_exit(finish):
    """While the script runs, ``os._exit`` and SIGTERM/SIGHUP first write the bundle (``finish(code)``)
    and then end the process with the script's code (128 + signal for a signal). SIGKILL cannot be
    caught: the bundle then holds the meta.json written at the start, ``"state": "running"``.

    ``os._exit`` from another thread cannot stop the profiler (its session belongs to the main thread:
    exporting from there crashed with SIGSEGV): that thread hands the exit to the main thread with a
    SIGTERM that unwinds the script with its code, and waits; the caller then writes the bundle and
    ends the process with ``os._exit`` (the yielded dict's ``"code"``)."""
    real_exit, pid, main = os._exit, os.getpid(), threading.main_thread()
    pending: dict = {}

    def _exit(code: int = 0) -> None:
        if os.getpid() == pid and threading.current_thread() is not main:
            if signal.SIGTERM in saved:             # else the script's own SIGTERM handler: no bundle, no crash
                pending["code"] = code
                signal.pthread_kill(main.ident, signal.SIGTERM)
                threading.Event().wait(60)          # the main thread writes the bundle and ends the process
        elif os.getpid() == pid:                    # not in a forked worker: it is the script leaving
            try:
                finish(code)
            except TracekitError as exc:
                say_error(f"tracekit: {exc}\n")
            except BaseException:                   # noqa: BLE001  (exiting anyway)
                pass
        real_exit(code)

    def on_signal(signum, frame):
        raise ScriptTerminated(pending.get("code", 128 + signum))

    saved = {}
    if threading.current_thread() is main:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                saved[sig] = signal.signal(sig, on_signal)
    os._exit = _exit
    try:
        yield pending
    finally:
        os._exit = real_exit
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def end_if_a_thread_exited(pending: dict) -> None:
    """After the bundle is written: a thread's ``os._exit`` ends the process now, with its code (the
    thread waits; exiting through the interpreter would wait for it)."""
    if "code" in pending:
        _end_forked_child(pending["code"])


def capture_script(script: str, args: list[str], out: str | None = None, steps: int | None = None,
                   warmup: int = 0, step_fn: str | None = None, quiet: bool = False, force: bool = False,
                   execution_trace: bool = True, modules: bool = True) -> int:
    """Profile ``python script args`` into a bundle folder; returns the script's exit code."""
    from tracekit.capture.launch import launcher_rank_out

    out = launcher_rank_out(out, script)                # under torchrun: OUT/rank$RANK
    path, source, code = load_script(script)
    if steps is not None and steps < 1:
        raise TracekitError("--steps must be at least 1")
    if warmup < 0:
        raise TracekitError("--warmup must be 0 or more")
    out_dir = (Path(out) if out else Path(f"{path.stem}.tracekit")).absolute()   # the script may chdir
    from tracekit.outputs import check_not_input
    check_not_input(out_dir, "-o", [path])
    if is_mlx_script(source):
        return _capture_mlx(path, args, out_dir, quiet, force)
    
    if importlib.util.find_spec("torch") is None:
        raise TracekitError("torch is not installed: capture needs it (pip install 'tracekit[capture]')")
    meta = {"framework": "torch", "command": [sys.executable, script, *args], "script": str(path.resolve()),
            "args": list(args), "cwd": str(Path.cwd()), "git": bundle.git_revision(path.resolve().parent)}
    session = Session(out_dir, steps=steps, warmup=warmup, quiet=quiet, meta=meta,
                      execution_trace=execution_trace, modules=modules)
    saved_path = sys.path[:]
    sys.path[0:1] = [str(path.resolve().parent)]       # --step-fn modules import as the script would
    try:
        code = install_step_fn(session, step_fn, path, source, code) if step_fn else code
    finally:
        sys.path[:] = saved_path
    bundle.prepare_out(out_dir, force)
    session.write_meta("running")
    session.adopt_script_profiler()
    if not step_fn:
        session.hook_root_module()
    session.start()
    pid = os.getpid()
    with bundle_on_every_exit(lambda code: _finish(session, code, quiet)) as exits:
        exit_code = run_script(code, path, [script, *args], {WRAP_NAME: session.wrap_step_fn})
    if os.getpid() != pid:              # a child the script forked ran to its end: the bundle is the parent's,
        _end_forked_child(exit_code)    # and the profiler's threads did not survive the fork
    _finish(session, exit_code, quiet)
    end_if_a_thread_exited(exits)
    return exit_code


def _end_forked_child(exit_code: int) -> None:
    """End the process now, its output flushed: a forked child of the script that ran to the end of it
    (exiting through the interpreter would stop a profiler whose threads stayed in the parent: a hang),
    or after a thread's ``os._exit``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code)


def _finish(session, exit_code: int, quiet: bool) -> None:
    """Write the bundle (once) and say what it holds."""
    if session.finished:
        return
    try:
        session.finish(exit_code)
    except OSError as exc:              # the script removed its -o folder, or the disk is full
        raise TracekitError(f"could not write the bundle {session.out} ({exc.strerror or exc}); the script's "
                            f"exit code was {exit_code}") from None
    trace = session.out / bundle.TRACE
    size = f"{trace.stat().st_size / 1e6:.2f} MB" if trace.exists() else "no trace"
    if session.step_rule == "whole script":
        note = "no steps found (no root nn.Module call; try --step-fn module:function)"
    else:
        note = f"{session.recorded} step(s) recorded, rule {session.step_rule}"
    if not quiet:
        say_error(f"tracekit: wrote {session.out} ({size}; {note}; script exit code {exit_code})\n")


def _capture_mlx(path: Path, args: list[str], out_dir: Path, quiet: bool, force: bool) -> int:
    if importlib.util.find_spec("mlx") is None:
        raise TracekitError(f"{path}: imports mlx, which is not installed here")
    from tracekit.capture.mlx import capture_mlx_script

    bundle.prepare_out(out_dir, force)
    return capture_mlx_script(str(path), list(args), str(out_dir), quiet)
