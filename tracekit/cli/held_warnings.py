"""Warnings held back until the command's end: each printed once, and none when it ends in exit 2.

A command that ends in an error (exit 2) says one line, the error: the warnings that came before it
(a skipped event, an unknown device) are about an analysis that gave nothing. Otherwise each distinct
warning is written once, after the command's own lines on stderr. Only ``tracekit: warning: ...``
lines are held; everything else written to stderr passes straight through.
"""

from __future__ import annotations

import contextlib
import sys

PREFIX = "tracekit: warning: "


class _HoldWarnings:
    """A stand-in for sys.stderr that keeps warning lines (deduplicated, in order) and passes the rest."""

    def __init__(self, stream):
        self.stream, self.partial, self.held = stream, "", {}

    def write(self, text: str) -> int:
        self.partial += text
        *lines, self.partial = self.partial.split("\n")
        for line in lines:
            if line.startswith(PREFIX):
                self.held.setdefault(line, None)
            else:
                self.stream.write(line + "\n")
        if self.partial and not PREFIX.startswith(self.partial[:len(PREFIX)]):
            self.stream.write(self.partial)      # a line that is no warning: no need to wait for its end
            self.partial = ""
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextlib.contextmanager
def held_warnings():
    """Hold warning lines while the block runs; ``release(code)`` writes them unless ``code`` is 2."""
    real = sys.stderr
    holder = _HoldWarnings(real) if real is not None else None
    state = {"code": 0}
    if holder is not None:
        sys.stderr = holder
    try:
        yield state
    finally:
        if holder is not None:
            sys.stderr = real
            rest = holder.partial
            if state["code"] != 2:
                for line in holder.held:
                    real.write(line + "\n")
                if rest:
                    real.write(rest)
            elif rest and not rest.startswith(PREFIX):
                real.write(rest)
            try:
                real.flush()
            except (OSError, ValueError):
                pass
