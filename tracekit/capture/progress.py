"""A live step counter on stderr while a capture records, drawn only when stderr is a terminal (pipes,
files, CI logs and tests get nothing; ``--quiet`` turns it off)."""

from __future__ import annotations

import sys
import time


class StepTicker:
    """``tracekit: recorded step 3/10 (12.4 s)`` rewritten in place after a recorded step, once the
    recording has run ``after_s`` seconds and at most once per ``every_s`` (a fast capture shows nothing;
    the script's own output, if any, shares the line until the next step); ``clear`` removes it."""

    def __init__(self, quiet: bool, total: int | None, stream=None, after_s: float = 2.0, every_s: float = 0.5):
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.on = not quiet and bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):     # a script may close or replace sys.stderr
            self.on = False
        self.total, self.t0, self.shown = total, time.perf_counter(), False
        self.after_s, self.every_s, self.drawn_at = after_s, every_s, float("-inf")

    def tick(self, recorded: int) -> None:
        now = time.perf_counter()
        if not self.on or now - self.t0 < self.after_s or now - self.drawn_at < self.every_s:
            return
        of = f"/{self.total}" if self.total else ""
        self._write(f"\rtracekit: recorded step {recorded}{of} ({now - self.t0:.1f} s)\x1b[K")
        self.shown, self.drawn_at = self.on, now

    def clear(self) -> None:
        if self.shown:
            self._write("\r\x1b[K")
            self.shown = False

    def _write(self, text: str) -> None:
        if not self.on:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (ValueError, OSError):
            self.on = False
