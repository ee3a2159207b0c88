"""Run a Python script as ``python script.py args`` would, in this process (torch and MLX capture)."""

from __future__ import annotations

import builtins
import importlib.util
import sys
import traceback
import types
from importlib.machinery import SourceFileLoader
from pathlib import Path

from tracekit.errors import TracekitError, exit_status, say_error


def load_script(script: str) -> tuple[Path, str, types.CodeType]:
    """Path, source and compiled code of a Python script; one-line errors for anything else."""
    path = Path(script)
    if not path.exists():
        raise TracekitError(f"{script}: no such file")
    if path.is_dir():
        raise TracekitError(f"{script}: is a folder, not a Python script")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise TracekitError(f"{script}: not a Python script (binary file)")
    try:
        source = importlib.util.decode_source(data)
    except (UnicodeDecodeError, SyntaxError) as exc:
        raise TracekitError(f"{script}: not a Python script (cannot decode it: {exc})") from None
    try:
        code = compile(source, str(path.resolve()), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TracekitError(f"{script}: not valid Python: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:
        raise TracekitError(f"{script}: not a Python script ({exc})") from None
    return path, source, code


def _script_traceback(exc: BaseException, path: Path) -> str:
    """The traceback python would print: our own frames above the script's are left out."""
    te = traceback.TracebackException.from_exception(exc)
    names = [f.filename for f in te.stack]
    first = names.index(str(path.resolve())) if str(path.resolve()) in names else 0
    te.stack = traceback.StackSummary.from_list(te.stack[first:])
    return "".join(te.format())


def _flush_quietly(stream) -> None:
    """Flush a stream the script may have closed or broken."""
    try:
        if stream is not None and not stream.closed:
            stream.flush()
    except (OSError, ValueError):
        pass


def run_script(code: types.CodeType, path: Path, argv: list[str], extra: dict) -> int:
    """Execute ``code`` as __main__ with python's argv and sys.path[0]; returns python's exit code."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=str(path.resolve()), __cached__=None, __builtins__=builtins, __spec__=None,
                         __package__=None, __loader__=SourceFileLoader("__main__", str(path)), **extra)
    saved_argv, saved_path, saved_main = sys.argv[:], sys.path[:], sys.modules.get("__main__")
    sys.argv = argv
    sys.path[0:1] = [str(path.resolve().parent)]
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
        return 0
    except SystemExit as exc:
        return exit_status(exc)
    except KeyboardInterrupt as exc:
        say_error(_script_traceback(exc, path))
        return 130
    except BaseException as exc:  # noqa: BLE001  (python's own top level: show it, exit 1)
        _flush_quietly(sys.stdout)
        say_error(_script_traceback(exc, path))
        return 1
    finally:
        _flush_quietly(sys.stdout)
        sys.argv, sys.path[:] = saved_argv, saved_path
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
