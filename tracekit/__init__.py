"""tracekit: where the GPU time went, kernel by kernel, against each kernel's roofline floor.

Stages, in the order data flows (docs/architecture.md): capture → load → model → classify → cost →
fusion → report / gate, with ``ops`` (one record per op family) read by every stage.
The Python API is ``tracekit.capture(out=...)`` (see ``tracekit.capture``).
"""

from tracekit import capture  # noqa: F401,E402  (the callable Python API; imports no torch)
from tracekit.version import __version__  # noqa: F401
