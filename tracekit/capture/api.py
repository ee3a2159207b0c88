"""The Python API: ``with tracekit.capture(out="bundle") as cap: ...; cap.step()``."""

from __future__ import annotations

import sys
from pathlib import Path

from tracekit import bundle
from tracekit.capture.session import Session, _say


class capture:
    """``with tracekit.capture(out="bundle") as cap: ...; cap.step()`` — records the block into a bundle.

    ``cap.step()`` ends the current step and begins the next (like ``prof.step()``); ``warmup``
    steps go unrecorded; ``steps`` stops recording after that many. The bundle is written on exit,
    also when the block raises (the exception propagates).
    """

    def __init__(self, out: str | Path = "capture.tracekit", *, steps: int | None = None, warmup: int = 0,
                 force: bool = False, quiet: bool = False) -> None:
        self.out, self._opts = Path(out), dict(steps=steps, warmup=warmup, quiet=quiet)
        self._force = force
        self.session: Session | None = None

    def __enter__(self) -> "capture":
        meta = {"framework": "torch", "command": "tracekit.capture()", "args": sys.argv,
                "git": bundle.git_revision(Path(sys.argv[0] or ".").resolve().parent)}
        self.session = Session(self.out, meta=meta, **self._opts)      # checks steps/warm-up first
        self.out = bundle.prepare_out(self.out, self._force)
        self.session.out = self.out
        self.session.write_meta("running")
        self.session.step_rule = "cap.step()"
        self.session.start()
        self.session.begin_step()
        return self

    def step(self) -> None:
        self.session.end_step()
        self.session.begin_step()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.session.finish(0 if exc_type is None else 1)
        _say(self.session.quiet, f"bundle written to {self.out}")
