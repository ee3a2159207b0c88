"""The ``tracekit calibrate`` flow: pick the device, measure, write the spec file, show the figures
beside the matching builtin spec.

stdout holds one thing, chosen by ``--format``: ``table`` (people; the default with ``-o``), ``toml``
(the spec itself; the default without ``-o``) or ``json`` (every figure with how it was measured).
Progress goes to stderr, and the table too when stdout holds the spec or the JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from tracekit.calibrate.figures import Calibration
from tracekit.calibrate.spec_file import compare, matching_builtin, spec_toml, table
from tracekit.errors import TracekitError
from tracekit.outputs import check_output_file, write_atomic

BACKENDS = ("cuda", "mps", "mlx", "mlx-cpu", "cpu")
FORMATS = ("table", "toml", "json")


def pick_backend(device: str | None) -> str:
    """``--device`` checked, or the first of cuda, mps, MLX's GPU, cpu (torch), mlx-cpu that is here."""
    if device is not None:
        if device not in BACKENDS:
            raise TracekitError(f"--device {device!r}: unknown (choose one of {', '.join(BACKENDS)})")
        return device
    try:
        import torch
    except ModuleNotFoundError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        return "cuda"
    if torch is not None and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    try:
        import mlx.core as mx

        from tracekit.calibrate.mlx_device import gpu_backend

        if gpu_backend(mx):
            return "mlx"
    except ModuleNotFoundError:
        mx = None
    if torch is None and mx is not None:
        return "mlx-cpu"
    return "cpu"


def measure(backend: str, quick: bool, progress: Callable[[str], None]) -> Calibration:
    if backend in ("mlx", "mlx-cpu"):
        from tracekit.calibrate import mlx_device

        return mlx_device.calibrate(backend, quick, progress)
    from tracekit.calibrate import torch_device

    return torch_device.calibrate(backend, quick, progress)


def calibrate_command(device: str | None, out: str | None, fmt: str | None, quick: bool, spec_id: str | None,
                      name: str | None, quiet: bool, force: bool = False) -> int:
    """Run ``tracekit calibrate``; returns the exit status (input errors raise TracekitError)."""
    fmt = fmt or ("table" if out else "toml")
    if fmt not in FORMATS:
        raise TracekitError(f"--format {fmt!r}: unknown (choose one of {', '.join(FORMATS)})")
    target = check_output_file(out, "-o", force=force) if out else None     # before minutes of measuring
    spec_id = spec_id or (target.stem if target is not None else None)
    backend = pick_backend(device)
    spec_id = spec_id or f"calibrated-{backend}"
    if not spec_id.strip() or any(c in spec_id for c in "/\\\n"):
        raise TracekitError(f"--id {spec_id!r}: a spec id is a bare name")
    progress = (lambda _msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    cal = measure(backend, quick, progress)
    text = spec_toml(cal, spec_id, name)
    if target is not None:
        write_atomic(target, text.encode("utf-8"), "-o")
        _check_round_trip(target)
    builtin = matching_builtin(cal)
    human = table(cal, builtin, str(target) if target is not None else None)
    if fmt == "table":
        sys.stdout.write(human)
        return 0
    if fmt == "toml":
        sys.stdout.write(text)
    else:
        doc = cal.to_json()
        doc.update(spec_id=spec_id, spec_file=str(target) if target is not None else None,
                   builtin=builtin.id if builtin else None,
                   comparison=compare(cal.values(), builtin) if builtin else [])
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    if not quiet:
        sys.stderr.write(human)
    return 0


def _check_round_trip(path: Path) -> None:
    """The file just written must load as --spec does (a failure here is tracekit's bug, said as one)."""
    from tracekit.cost.devices import load_spec

    try:
        load_spec(str(path))
    except TracekitError as exc:
        raise RuntimeError(f"the spec calibrate wrote does not load: {exc}") from None
