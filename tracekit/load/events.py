"""Trace events as typed records that hold only what the kernel table reads.

``decode_fast`` turns a JSON array of Chrome-trace events into ``Event`` records with msgspec: every
other field is skipped while parsing (a ``python_function`` event's args are never built), and an
op's shape fields stay raw JSON until an op that a row uses needs them. The records' types are the
well-formed case; an event outside them (a numeric string ``ts``, a string id, ``args`` that is not
an object...) makes the caller decode that stretch with ``decode_lenient`` instead: orjson and the
per-event checks of ``load.fields``, which name a bad event (exit 2) or accept it as before. Both give
the same records for the events both accept.
"""

from __future__ import annotations

import re

import msgspec
import orjson
from msgspec import UNSET, Raw, UnsetType

from tracekit.load.fields import bad_event, check_common, check_time
from tracekit.load.engine_steps import is_iteration

DEVICE_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
                     "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
MTIA_DEVICE = "mtia_ccp_events"         # MTIA device activity: compute, DMA and waits in one category (mtia_kind)
PROFILER_RANGE = "cuda_profiler_range"  # CUPTI range profiler: per-kernel counters, no kernel timeline (warned)
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "mtia_runtime"}
CPU_OP_CATEGORIES = {"cpu_op", "operator"}
ARG_NAMES = {"external_id": "External id", "input_dims": "Input Dims", "input_type": "Input type",
             "input_strides": "Input Strides", "concrete": "Concrete Inputs", "rf_id": "Record function id"}
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
NO_RAW = Raw()                          # a shape field the op does not have
_LOOSE = int | float | str | None | UnsetType       # read leniently where read at all (device, stream...)

# what an event is to the loader: its group (a complete event), or what is counted when it is not one
DEVICE, MTIA, LAUNCH, CPU_OP, ANNOTATION, PYTHON, NOT_COMPLETE, RANGE = 1, 2, 3, 4, 5, 6, 7, 8
GROUP = {**{c: DEVICE for c in DEVICE_CATEGORIES}, MTIA_DEVICE: MTIA, PROFILER_RANGE: RANGE,
         **{c: LAUNCH for c in LAUNCH_CATEGORIES},
         **{c: CPU_OP for c in CPU_OP_CATEGORIES}, "user_annotation": ANNOTATION, "python_function": PYTHON}
NOT_X = {c: NOT_COMPLETE for c in (*DEVICE_CATEGORIES, MTIA_DEVICE)}
MTIA_WAITS = ("event_wait", "event_record")  # an MTIA stream waiting on / marking an event: no device work


class Args(msgspec.Struct, gc=False, rename=ARG_NAMES):
    """The args the loader reads. Ids are integers here (anything else: the lenient decoder)."""

    correlation: int | UnsetType = UNSET
    external_id: int | UnsetType = UNSET
    device: _LOOSE = UNSET
    stream: _LOOSE = UNSET
    grid: list[int] | str | None | UnsetType = UNSET
    block: list[int] | str | None | UnsetType = UNSET
    bytes: _LOOSE = UNSET
    input_dims: Raw = NO_RAW
    input_type: Raw = NO_RAW
    input_strides: Raw = NO_RAW
    concrete: Raw = NO_RAW
    kernel_file: str | None | UnsetType = UNSET
    rf_id: _LOOSE = UNSET
    kernel: str | None | UnsetType = UNSET
    size: _LOOSE = UNSET                # an MTIA DMA request's bytes
    direction: _LOOSE = UNSET           # an MTIA DMA request's HOST_TO_DEVICE, DEVICE_TO_HOST...


NO_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    """One trace event: the fields any stage of the loader reads."""

    name: str | UnsetType = UNSET
    cat: str | None = None
    ph: str | None = None
    ts: float | UnsetType = UNSET
    dur: float | UnsetType = UNSET
    tid: int | str | None = None
    pid: int | str | None = None
    args: Args | None = None


_EVENTS = msgspec.json.Decoder(list[Event])
FAST_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def decode_fast(text) -> list[Event]:
    """A JSON array of events (bytes or Raw) → records; raises one of FAST_ERRORS otherwise."""
    return _EVENTS.decode(text)


def decode_lenient(events: list, base: int, path, marker) -> list[Event]:
    """Already-parsed events (orjson) → records, with the per-event checks of the original loader:
    the first malformed event the kernel table needs is a TracekitError naming it (its index is
    ``base`` + its position); ids, tids and numbers keep whatever type the trace gave them."""
    out = []
    for k, e in enumerate(events):
        i = base + k
        if not isinstance(e, dict):
            raise bad_event(path, i, "is not a JSON object")
        cat = e.get("cat")
        if cat is not None and not isinstance(cat, str):
            raise bad_event(path, i, f"has a 'cat' that is a {type(cat).__name__}, not a string")
        group = GROUP.get(cat) if e.get("ph") == "X" else None
        if group == DEVICE or group == MTIA:
            check_time(e, path, i)
            check_common(e, path, i)
        elif group == LAUNCH:
            if check_common(e, path, i).get("correlation") is not None:
                check_time(e, path, i, dur=False)
        elif group == CPU_OP:
            check_common(e, path, i)
            check_time(e, path, i)
        elif group == ANNOTATION or (group == PYTHON and marker is not None):
            name = e.get("name")
            if isinstance(name, str) and is_step_name(name, marker):
                check_time(e, path, i)
        out.append(_record(e))
    return out


def mtia_kind(name) -> str:
    """What an MTIA device event (``mtia_ccp_events``) is, from its name: ``"memcpy"`` for a DMA request
    (``dma_request``), ``"wait"`` for a stream's event wait or record (``event_wait``, ``event_record``:
    no device work), else ``"kernel"`` (a job: ``pe_exe``, ``merge``, ``fc-dtype_Float``...)."""
    if not isinstance(name, str):
        return "kernel"
    if name.startswith("dma"):
        return "memcpy"
    return "wait" if name in MTIA_WAITS else "kernel"


def dma_args(a: Args) -> Args:
    """An MTIA DMA request's args with its ``size`` as the copy's ``bytes``."""
    return Args(correlation=a.correlation, external_id=a.external_id, device=a.device, stream=a.stream,
                bytes=a.size, direction=a.direction)


def dma_name(name, a: Args):
    """``dma_request (HOST_TO_DEVICE)``: the trace's name with the direction its args give (a copy's cost
    reads the direction from the name, as from CUDA's ``Memcpy HtoD``)."""
    return f"{name} ({a.direction})" if isinstance(name, str) and isinstance(a.direction, str) else name


def is_step_name(name: str, marker) -> bool:
    """A user annotation (or, with a marker, a Python function) that marks a step: without a marker, a
    ProfilerStep#N or a serving engine's iteration (``load.engine_steps``; used when no ProfilerStep is)."""
    if marker is not None:
        return bool(marker.search(name))
    return PROFILER_STEP.match(name) is not None or is_iteration(name)


def _record(e: dict) -> Event:
    """A checked event dict as a record; absent fields as the fast decoder leaves them."""
    a = e.get("args")
    args = Args(**{f: a[k] for f, k in _ARG_KEYS if k in a}) if isinstance(a, dict) else None
    return Event(name=e.get("name", UNSET), cat=e.get("cat"), ph=e.get("ph"), ts=e.get("ts", UNSET),
                 dur=e.get("dur", UNSET), tid=e.get("tid"), pid=e.get("pid"), args=args)


_ARG_KEYS = [(f, ARG_NAMES.get(f, f)) for f in Args.__struct_fields__]


def parse_lenient(text, path) -> object:
    """orjson's parse of a JSON text, with the loader's one-line error when it is not JSON."""
    from tracekit.errors import TracekitError
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise TracekitError(f"{path}: invalid JSON ({exc}); is the file truncated?") from None


def shape_value(raw):
    """An op's shape field as Python values: raw JSON (fast records, chunk copies) parsed as orjson
    parses a whole trace; a lenient record's value as it is; absent → ``UNSET``; text orjson refuses
    (a number beyond double range) → ``UNDECODABLE``, which no shape check accepts."""
    if isinstance(raw, Raw):
        raw = bytes(raw)
    if isinstance(raw, bytes):
        if not raw:
            return UNSET
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return UNDECODABLE
    return raw


UNDECODABLE = object()
