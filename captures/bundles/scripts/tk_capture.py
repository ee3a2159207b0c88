"""Fallback entry point: `tracekit capture` alone, used by run_h200.sh only if `python -m tracekit` fails to import."""
import sys

import typer

from tracekit.capture import script as capture_cli
from tracekit.errors import TracekitError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _root() -> None:
    """tracekit capture only."""


capture_cli.register(app)
try:
    app()
except TracekitError as exc:
    print(f"tracekit: {exc}", file=sys.stderr)
    sys.exit(2)
