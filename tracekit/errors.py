"""The one error type users see: a one-line message and exit code 2."""


class TracekitError(Exception):
    """Unusable input or usage. The CLI prints ``tracekit: <message>`` on stderr and exits 2."""

    exit_code = 2
