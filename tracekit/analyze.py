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
from tracekit.load.capture_dir import DETAILS, TRACE_FILE, CaptureFile, capture_files_in, default_folder
from tracekit.load.collectives import collective_rows, world_size
from tracekit.load.engine_steps import annotated_steps
from tracekit.load.graph_replay import capture_files, map_graph_kernels
from tracekit.load.iterations import split_by_graph_iterations
from tracekit.load.kineto import load_trace, resolve_trace_path
from tracekit.load.twins import adopt_twins
from tracekit.model import cache
from tracekit.model.cache_key import path_text
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


CPU_SPEC_WARNING = ("spec cpu: the builtin cpu spec was measured on another machine (tracekit's 2-core dev VM); "
                    "measure this one with `tracekit calibrate --device cpu -o this_cpu.toml` and pass --spec this_cpu.toml")


def choose_spec(trace: Trace, device: str | None, spec: str | None):
    """--spec file, else --device id, else the spec matching the trace's device; None when unknown."""
    if spec or device:
        chosen = load_spec(spec) if spec else spec_by_id(device)
        if chosen.id == "cpu" and chosen.path == spec_by_id("cpu").path:     # the builtin one, not a calibrated file
            trace.warnings.append(CPU_SPEC_WARNING)
        return chosen
    if trace.metadata.get("framework") == "mlx":
        return _mlx_spec(trace)
    if trace.is_cpu_only:
        trace.warnings.append("CPU-only trace: no floors unless --spec names this CPU's ceilings (tracekit calibrate "
                              "--device cpu -o this_cpu.toml writes them)")
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


def normalise(trace: Trace, bundle_dir: Path | None = None, captures: Path | None = None,
              named: bool = False) -> Trace:
    """The stages that depend on the trace (and its bundle's graph captures, and ``captures``: an
    engine's capture-trace folder or file) alone, in place: twins, category, each communication
    kernel's collective, graph replays mapped to their capture ops (``named``: the user named the
    captures: say so when the trace replays no graph). What this leaves is what the cache keeps."""
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
        map_graph_kernels(trace, bundle_dir, _capture_sources(trace, captures))
        split_by_graph_iterations(trace)         # a serving trace with no steps: its engine iterations
    elif captures is not None and named:
        trace.warnings.append(f"--graph-captures {captures}: the trace replays no CUDA/HIP graph; not used")
    _none_for_nan(trace.kernels)
    trace.normalised = True
    return trace


def _capture_sources(trace: Trace, captures: Path | None) -> list:
    """The capture traces of ``captures`` for the trace's rank (a file: itself), notes in warnings."""
    if captures is None:
        return []
    if captures.is_file():
        return [CaptureFile(captures)]
    info = trace.metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    files, notes = capture_files_in(captures, rank if isinstance(rank, int) and not isinstance(rank, bool) else None)
    trace.warnings.extend(notes)
    return files


def capture_key_files(captures: Path | None) -> list[Path]:
    """Every file a capture folder's mapping may read (all ranks: the rank is known only once loaded)."""
    if captures is None:
        return []
    if captures.is_file():
        return [captures]
    return sorted(p for p in captures.iterdir() if p.is_file() and (TRACE_FILE.search(p.name) or p.name == DETAILS))


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
    engines = annotated_steps(trace.steps)         # serving: each step's KV keys, for paged attention
    annotate_fusion(df, bundle_dir, sources, engines)
    cost_rows(df, sources.roles, engines, sources.source)
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
                 spec: str | None = None, et: str | Path | None = None, skip: int = 0,
                 graph_captures: str | Path | None = None) -> list[Trace]:
    """Everything ``explain`` shows, for a trace file, a capture bundle or an MLX graph. ``et``: the
    execution trace of the same run (default: the bundle's et.json.gz, when there is one); ``skip``:
    leading steps (warm-up, compile) left out of the per-step figures; ``graph_captures``: a serving
    engine's capture traces (a folder, or one file; default: a ``capture_traces/`` folder beside the
    trace, load.capture_dir)."""
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
    if graph_captures is not None and not Path(graph_captures).exists():
        raise TracekitError(f"--graph-captures {graph_captures}: no such file or folder")
    captures = Path(graph_captures) if graph_captures is not None else default_folder(p)
    bundle_dir = bundle_dir_of(p)
    trace = skip_steps(load_normalised(p, step_marker, bundle_dir, captures, graph_captures is not None), skip)
    if found is None:
        lost = _missing_execution_trace(p)
        if lost:
            trace.warnings.append(lost)
    return [annotate(trace, device, spec, bundle_dir, found)]


def _missing_execution_trace(path: Path) -> str | None:
    """A warning when the bundle's meta.json names an execution trace the bundle does not hold: the
    one-kernel floors fall back to estimates (size+dtype links) instead of exact storages."""
    folder = path if path.is_dir() else path.parent
    try:
        meta = bundle.read_meta(folder) or {}
    except TracekitError:
        return None
    named = meta.get("execution_trace") if isinstance(meta, dict) else None
    if not isinstance(named, str) or not named or (folder / named).is_file():
        return None
    return (f"meta.json names the execution trace {named}, but {folder} does not hold it: one-kernel floors "
            "are estimates (tensors matched by size and dtype), not exact")


def load_normalised(path: Path, step_marker: str | None = None, bundle_dir: Path | None = None,
                    captures: Path | None = None, named: bool = False) -> Trace:
    """The trace at ``path`` loaded and normalised, from the cache when it holds it (model.cache)."""
    trace_file = resolve_trace_path(path)
    extra = [*capture_files(bundle_dir), *capture_key_files(captures)]
    salt = [path_text(Path(captures).resolve()), named] if captures is not None else None
    k = cache.key(trace_file, step_marker, extra, salt) if cache.folder() is not None else None
    trace = cache.read(k, str(trace_file))
    if trace is None:
        trace = normalise(load_trace(trace_file, step_marker), bundle_dir, captures, named)
        cache.write(k, trace)
    return trace
