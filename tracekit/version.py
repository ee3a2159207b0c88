"""tracekit's version, in one place (meta.json, cache keys and --version read it)."""

__version__ = "0.1.0"
