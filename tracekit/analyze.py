"""The explain pipeline: load → classify → map graph replays → fused ops → cost → roofline."""

from __future__ import annotations

from pathlib import Path

import orjson

from tracekit.classify.categories import classify
from tracekit.cost.devices import load_spec, match_device, spec_by_id
from tracekit.cost.roofline import OUT_OF_RANGE, apply_roofline, cost_rows
from tracekit.errors import TracekitError
from tracekit import bundle
from tracekit.fusion.exact import join_execution_trace
from tracekit.load.execution_trace import fill_tensor_lists, read_execution_trace
from tracekit.fusion.names import KernelSources, annotate_fusion
from tracekit.load.collectives import collective_rows, world_size
from tracekit.load.graph_replay import capture_files, map_graph_kernels
from tracekit.load.kineto import load_trace, resolve_trace_path
from tracekit.load.twins import adopt_twins
from tracekit.model import cache
from tracekit.model.schema import COLUMNS, KERNEL_COLUMNS, validate
from tracekit.model.trace import Trace, skip_steps


def is_mlx_input(path: Path) -> bool:
    """A bare .dot graph, or a bundle whose meta.json says it holds MLX graphs (or that has graphs/)."""
    if path.suffix == ".dot" or (path / "graphs").is_dir():
        return True
    meta = path / "meta.json"
    if path.is_dir() and meta.is_file():
        try:
            return orjson.loads(meta.read_bytes()).get("framework") == "mlx"
        except (orjson.JSONDecodeError, AttributeError):
            raise TracekitError(f"{meta}: invalid JSON") from None
    return False


def bundle_dir_of(path: Path) -> Path | None:
    """The capture bundle a path belongs to (it holds kernel sources under kernels/), if any; for a
    bare trace file, a ``<trace stem>.kernels/`` folder next to it (raw captures keep sources there)."""
    folder = path if path.is_dir() else path.parent
    sources = path.parent / (path.name.split(".json")[0] + ".kernels")
    if path.is_file() and sources.is_dir():
        return sources
    return folder if (folder / "kernels").is_dir() or (folder / "meta.json").is_file() else None


def execution_trace_of(path: Path) -> Path | None:
    """The execution trace kept with a trace: ``et.json.gz`` in its capture bundle, if any."""
    folder = path if path.is_dir() else path.parent
    found = folder / bundle.EXECUTION_TRACE
    if found.is_file() and (path.is_dir() or (folder / bundle.META).is_file()):
        return found
    return None


def choose_spec(trace: Trace, device: str | None, spec: str | None):
    """--spec file, else --device id, else the spec matching the trace's device; None when unknown."""
    if spec:
        return load_spec(spec)
    if device:
        return spec_by_id(device)
    if trace.metadata.get("framework") == "mlx":
        return _mlx_spec(trace)
    if trace.is_cpu_only:
        trace.warnings.append("CPU-only trace: no floors unless --device or --spec names the CPU's ceilings")
        return None
    if not trace.device_properties:
        trace.warnings.append("trace names no device: no floors (use --device or --spec)")
        return None
    found = match_device(trace.device_properties[0])
    if found is None:
        trace.warnings.append(f"unknown device {trace.device_name!r}: no floors rather than a wrong spec "
                              "(use --device ID or --spec FILE)")
    return found


def _mlx_spec(trace: Trace):
    """An MLX graph: the Apple GPU spec matching its device name, the "cpu" spec on a CPU device."""
    kind = trace.metadata.get("device_type")
    if kind is None:
        return None
    try:
        found = match_device({"name": trace.device_name or ""}) if kind == "gpu" else \
            spec_by_id("cpu") if kind == "cpu" else None
    except TracekitError:
        found = None
    if found is None:
        trace.warnings.append(f"no device spec matches {trace.device_name!r}: no floors (pass --device/--spec)")
    return found


def normalise(trace: Trace, bundle_dir: Path | None = None) -> Trace:
    """The stages that depend on the trace (and its bundle's graph captures) alone, in place: twins,
    category, each communication kernel's collective, graph replays mapped to their capture ops. What
    this leaves is what the cache keeps (model.cache)."""
    if trace.normalised:
        return trace
    df = trace.kernels
    twins = adopt_twins(df)
    if twins:
        trace.warnings.append(f"{twins} kernels launched before the trace began take the op and shapes of an "
                              "identical kernel (same name, grid, block, stream): op_source 'twin'")
    if df["category"].isna().any():
        classify(df)
    if "collective" not in df.columns:
        df.insert(KERNEL_COLUMNS.index("collective"), "collective", None)
    df["collective"] = collective_rows(df, trace.path, world_size(trace.metadata), trace.source_events)
    if df["graph"].any():
        map_graph_kernels(trace, bundle_dir)
    _none_for_nan(trace.kernels)
    trace.normalised = True
    return trace


def _none_for_nan(df) -> None:
    """Text columns hold a string or None: a NaN a stage left there (an op copied from a row without one)
    becomes None, so a table read back from the cache is the same table."""
    for c in COLUMNS:
        if c.kind == "str" and c.name in df.columns and df[c.name].dtype == object:
            missing = df[c.name].isna()             # NaN and None alike: None stays None
            if missing.any():
                df[c.name] = df[c.name].where(~missing, None)


def annotate(trace: Trace, device: str | None = None, spec: str | None = None,
             bundle_dir: Path | None = None, et: Path | None = None) -> Trace:
    """Fill category, op (graph replays), fused_ops, cost and roofline columns in place; with an
    execution trace ``et``, each row's exact reads and writes (``et_io``)."""
    df = normalise(trace, bundle_dir).kernels
    sources = KernelSources(bundle_dir)
    et_data = read_execution_trace(et, {int(r) for r in df["op_rf_id"] if r != -1}) if et is not None else None
    if et_data is not None:
        fill_tensor_lists(df, et_data)              # list shapes this profiler left out, before io and cost
    annotate_fusion(df, bundle_dir, sources)
    cost_rows(df, sources.roles)
    dropped = int((df["cost_note"] == OUT_OF_RANGE).sum()) if len(df) else 0
    if dropped:
        trace.warnings.append(f"{dropped} kernels have FLOPs or bytes that are not finite, negative or over 2^53 "
                              "(shapes or sizes out of range): no floor for them")
    if et_data is not None:
        _join_et(trace, df, et, sources, et_data)
    trace.spec = choose_spec(trace, device, spec)
    trace.kernels = validate(apply_roofline(df, trace.spec))
    return trace


def _join_et(trace: Trace, df, et: Path, sources: KernelSources, et_data=None) -> None:
    """Join the execution trace; say (in warnings) how many kernels in steps it does not cover."""
    info = join_execution_trace(df, et, sources, et_data)
    trace.metadata["execution_trace"] = info
    inside = df["step"] >= 0
    missing = int((inside & df["et_io"].isna()).sum())
    if missing:
        trace.warnings.append(f"execution trace {et.name}: {missing} of {int(inside.sum())} kernels in steps not "
                              "joined (no launching op, op not in it, or an Inductor kernel without its source): "
                              "their steps get a lower-bound one-kernel floor")


def analyze_path(path: str | Path, step_marker: str | None = None, device: str | None = None,
                 spec: str | None = None, et: str | Path | None = None, skip: int = 0) -> list[Trace]:
    """Everything ``explain`` shows, for a trace file, a capture bundle or an MLX graph. ``et``: the
    execution trace of the same run (default: the bundle's et.json.gz, when there is one); ``skip``:
    leading steps (warm-up, compile) left out of the per-step figures."""
    p = Path(path)
    if not p.exists():
        raise TracekitError(f"{p}: no such file or folder")
    if is_mlx_input(p):
        if et is not None:
            raise TracekitError("--et joins a PyTorch execution trace to a torch.profiler trace, not to MLX graphs")
        from tracekit.load.mlx import load_mlx
        return [annotate(t, device, spec) for t in load_mlx(p)]
    found = Path(et) if et is not None else execution_trace_of(p)
    if found is not None and not found.exists():
        raise TracekitError(f"{found}: no such execution trace file")
    bundle_dir = bundle_dir_of(p)
    trace = skip_steps(load_normalised(p, step_marker, bundle_dir), skip)
    return [annotate(trace, device, spec, bundle_dir, found)]


def load_normalised(path: Path, step_marker: str | None = None, bundle_dir: Path | None = None) -> Trace:
    """The trace at ``path`` loaded and normalised, from the cache when it holds it (model.cache)."""
    trace_file = resolve_trace_path(path)
    k = cache.key(trace_file, step_marker, capture_files(bundle_dir)) if cache.folder() is not None else None
    trace = cache.read(k, str(trace_file))
    if trace is None:
        trace = normalise(load_trace(trace_file, step_marker), bundle_dir)
        cache.write(k, trace)
    return trace
