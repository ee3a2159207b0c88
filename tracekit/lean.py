"""Imports a command pays only when it uses them (docs/performance.md).

pandas 3 imports pyarrow when it is installed (about 0.14 s of a command's start-up), whether or not
anything uses it; tracekit needs pyarrow only for its Parquet cache (``model.cache``) and the
multi-rank tables. A command that will touch neither imports pandas through ``pandas_without_arrow``:
pandas then keeps its text in Python objects (tracekit's table does anyway: ``load.link``), and a
later ``import pyarrow`` still works (``model.cache`` hands pyarrow plain arrays, never pandas'
Arrow types).
"""

from __future__ import annotations

import os
import sys


def cache_off_by_env() -> bool:
    """``TRACEKIT_NO_CACHE`` set to anything but '' or '0'."""
    return os.environ.get("TRACEKIT_NO_CACHE", "") not in ("", "0")


def pandas_without_arrow() -> None:
    """Import pandas with pyarrow hidden from it; nothing when either is already imported."""
    if "pandas" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None            # an import of it raises ImportError: pandas goes without
    try:
        import pandas  # noqa: F401
    finally:
        if sys.modules.get("pyarrow", 0) is None:
            del sys.modules["pyarrow"]
