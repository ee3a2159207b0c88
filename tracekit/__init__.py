"""tracekit: where the GPU time went, kernel by kernel, against each kernel's roofline floor.

Stages, in the order data flows (docs/architecture.md): capture → load → model → classify → cost →
fusion → report / gate, with ``ops`` (one record per op family) read by every stage.
The Python API: ``tracekit.load(path)`` analyses a trace, bundle, multi-rank folder or MLX graph
(``tracekit.api.Analysis``: kernels, ops, steps as pandas frames; docs/api.md), and
``tracekit.capture(out=...)`` records one (see ``tracekit.capture``). ``import tracekit`` imports
neither pandas nor torch: they load on first use.
"""

from tracekit import capture  # noqa: F401,E402  (the callable Python API; imports no torch)
from tracekit.version import __version__  # noqa: F401


import sys as _sys
import types as _types


def _load(path, **options):
    """Analyse ``path`` (trace file, capture bundle, multi-rank folder or MLX graph) as
    ``tracekit explain`` does: a ``tracekit.api.Analysis``. ``options``: step_marker, device, spec,
    et, skip_steps, cache (see ``tracekit.api.load``)."""
    from tracekit.api import load as api_load
    return api_load(path, **options)


load = _load


class _LoadStage(_types.ModuleType):
    """The ``tracekit.load`` stage package, callable as ``tracekit.load(path)`` too: importing the
    package (every analysis does) rebinds the name ``tracekit.load`` to it."""

    def __call__(self, path, **options):
        return _load(path, **options)


class _Package(_types.ModuleType):
    """The ``tracekit`` package: when the import system binds ``tracekit.load`` to the stage package, that
    package becomes callable (``_LoadStage``), so ``tracekit.load(path)`` works before and after."""

    def __setattr__(self, name, value):
        if name == "load" and isinstance(value, _types.ModuleType) and type(value) is _types.ModuleType:
            value.__class__ = _LoadStage
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
