"""The one error type users see: a one-line message and exit code 2."""

import os
import re
import sys

MAX_MESSAGE_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one bounded line: control characters (newlines included) written as escapes, cut
    to ``limit`` characters. Errors and warnings quote trace text, which may hold anything."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


_WARNED: set[str] = set()


def warn(text: str, limit: int = 500) -> None:
    """``tracekit: warning: TEXT`` on stderr as one bounded line, once per run (``reset_warnings``)."""
    line = one_line(text, limit)
    if line in _WARNED:
        return
    _WARNED.add(line)
    print(f"tracekit: warning: {line}", file=sys.stderr)


def reset_warnings() -> None:
    """Forget the warnings printed so far (each CLI run starts afresh)."""
    _WARNED.clear()


class TracekitError(Exception):
    """Unusable input or usage. The CLI prints ``tracekit: <message>`` on stderr and exits 2.
    The message is always one line (see ``one_line``), whatever trace text it quotes."""

    exit_code = 2

    def __init__(self, message: str = ""):
        super().__init__(one_line(message))


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
