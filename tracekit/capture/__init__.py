"""Stage 1, capture: run a script (or a block of code) under torch.profiler, or record MLX graphs,
into a bundle folder (``tracekit.bundle`` owns its layout).

``session`` drives one torch.profiler run, ``script`` runs an unmodified script as ``__main__``,
``mlx`` records MLX graphs. The package itself is callable, so the Python API reads
``with tracekit.capture(out="bundle") as cap: ...; cap.step()`` (``api.capture``); torch is
imported only when a capture starts.
"""

import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from tracekit.capture.api import capture

        return capture(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
