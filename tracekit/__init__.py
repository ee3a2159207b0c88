"""tracekit: where the GPU time went, kernel by kernel, against each kernel's roofline floor."""

__version__ = "0.1.0"


def capture(*args, **kwargs):
    """Profile code in-process: ``with tracekit.capture(out="bundle") as cap: ...; cap.step()``."""
    from .capture import capture as _capture

    return _capture(*args, **kwargs)
