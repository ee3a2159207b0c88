"""What every command's run shares, without typer: stdout made safe to write, and the mapping of what a
command raised to one line on stderr and an exit status (``cli.app`` for the typer path, ``cli.main``
for the console entry point's fast path)."""

from __future__ import annotations

import errno
import os
import sys

from tracekit.errors import TracekitError

# optional packages a command may need: the extra that installs each (pyproject.toml)
EXTRAS = {"torch": "capture", "mlx": "mlx", "pydot": "dot", "hta": "hta", "psutil": "hta"}
_WRITE_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EBADF", "EIO", "EROFS", "EDQUOT", "EFBIG", "EPIPE")
                 if hasattr(errno, n)}


def prepare_stdout(argv: list[str]) -> None:
    """A closed stdout becomes one that fails to write (one line, exit 2); a file name that is not UTF-8,
    printed, is escaped. Not for capture and measure: the user's script runs in this process."""
    if argv[:1] in (["capture"], ["measure"]):
        return
    if sys.stdout is None:                            # started with stdout closed
        sys.stdout = _ClosedStream()
    elif hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(errors="backslashreplace")
        except (ValueError, OSError):
            pass


def error_status(exc: BaseException, argv: list[str]) -> int:
    """The status for what a command raised, after its one line on stderr: unusable input (TracekitError)
    is its message and its exit code (2); a missing optional package names the extra that installs it;
    anything else is one "internal error" line (TRACEKIT_DEBUG=1 re-raises it)."""
    if isinstance(exc, SystemExit):               # a command that ends with sys.exit
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(exc, TracekitError):
        print(f"tracekit: {exc}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, BrokenPipeError):
        return 0
    if isinstance(exc, KeyboardInterrupt):
        print("tracekit: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, ModuleNotFoundError):
        top = (exc.name or "").split(".")[0]
        if top not in EXTRAS or os.environ.get("TRACEKIT_DEBUG"):
            return internal_error(exc, argv)
        print(f"tracekit: this input needs the optional package '{top}', which is not installed "
              f"(pip install 'tracekit[{EXTRAS[top]}]')", file=sys.stderr)
        return 2
    if isinstance(exc, OSError):                  # stdout full, closed or gone; files are checked earlier
        _drop_stdout()
        what = exc.strerror or type(exc).__name__
        print(f"tracekit: cannot write the output ({what})" if exc.errno in _WRITE_ERRNOS or exc.filename is None
              else f"tracekit: {what}: {exc.filename!r}", file=sys.stderr)
        return 2
    if isinstance(exc, Exception):                # a bug, or input we did not foresee: still one line
        return internal_error(exc, argv)
    raise exc


class _ClosedStream:
    """sys.stdout when the process started with it closed: writing is an OSError (one line, exit 2)."""

    def write(self, *args):
        raise OSError(errno.EBADF, "stdout is closed")

    flush = write
    buffer = property(lambda self: self)
    closed = False

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush of what could not be written stays quiet."""
    if isinstance(sys.stdout, _ClosedStream):
        sys.stdout = None
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    from tracekit.outputs import stdout_to_devnull
    stdout_to_devnull()


def internal_error(exc: BaseException, argv: list[str]) -> int:
    if os.environ.get("TRACEKIT_DEBUG"):
        raise exc
    where = " ".join(argv[:2])
    print(f"tracekit: internal error on '{where}': {type(exc).__name__}: {exc} "
          "(set TRACEKIT_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
    return 2
