"""The one error type users see: a one-line message and exit code 2."""

import os
import sys


class TracekitError(Exception):
    """Unusable input or usage. The CLI prints ``tracekit: <message>`` on stderr and exits 2."""

    exit_code = 2


def say_error(text: str) -> None:
    """Write to stderr even when the script closed or replaced sys.stderr."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and not stream.closed:
                stream.write(text)
                stream.flush()
                return
        except (OSError, ValueError):
            continue
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass


def exit_status(exc: SystemExit) -> int:
    """The status ``python script.py`` exits with after ``sys.exit(code)`` (a message prints, status 1)."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    say_error(f"{exc.code}\n")
    return 1
