"""Which captured graph each replay replays, in time linear in the replays.

Captures are indexed by their kernel count and, where their launch events name the kernels (ROCm),
by the multiset of those names; a replay is paired only with the captures under its own key, and
replays with the same kernel sequence, graph id, batch size and launch count share one answer. Among
the captures that fit (``graph_replay._pair``):

1. the graph id, where the trace records it (``tracekit::graph_replay#G``), picks the capture of that
   id; a replay whose id no capture carries is compared with the captures without one (an engine's);
2. if fits give different ops, the step's batch size (engine annotation) keeps the captures of the
   smallest captured size ≥ it (the graph an engine pads a batch up to); a step without one that holds
   one replay keeps the captures of the one captured size among the leading dims of its eager ops
   (the inputs copied in, the sampled logits: ``eager_sizes``);
3. then, among vLLM's FULL and PIECEWISE captures, the step's number of graph launches: several →
   PIECEWISE, one → FULL;
4. what is still ambiguous stays unmatched, with the reason (no guessing).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tracekit.ops.matmul import gemm_tokens


@dataclass
class Capture:
    """One graph capture: its nodes in launch order as (kind, kernel name or None, op event or None)."""

    source: str
    gid: int | None
    nodes: list[tuple[str, str | None, dict | None]] = field(default_factory=list)
    batch_size: int | None = None       # tokens it was captured for (capture annotation, file name, details)
    mode: str | None = None             # as the engine names it: FULL, PIECEWISE, DECODE...
    first: bool = True                  # the first piece captured for its size (a replay of it begins an iteration)
    modules: dict = field(default_factory=dict)     # id(op event) → the nn.Module around its launch

    def by_kind(self, kind: str) -> list[tuple[str, str | None, dict | None]]:
        return [n for n in self.nodes if n[0] == kind]


def _pair(replay, cap: Capture) -> list[dict | None] | None:
    """The capture op for each replay row; None when the kernels disagree (count or names).

    Kernels decide whether the capture fits; memcpy/memset rows are paired only when their counts
    agree too (the profiler may not report every copy node), else they stay unmapped.
    """
    out: list[dict | None] = [None] * len(replay)
    for kind in ("kernel", "memcpy", "memset"):
        rows = [k for k, v in enumerate(replay["kind"]) if v == kind]
        nodes = cap.by_kind(kind)
        if len(rows) != len(nodes):
            if kind == "kernel":
                return None
            continue
        named = all(n[1] for n in nodes)
        free = list(range(len(nodes)))
        for k in rows:
            name = replay["name"].iat[k]
            j = next((j for j in free if nodes[j][1] == name), None) if named else free[0]
            if j is None:
                return None
            free.remove(j)
            out[k] = nodes[j][2]
    return out


def _signature(ops: list[dict | None]) -> list:
    return [None if op is None else (op.get("name"), repr((op.get("args") or {}).get("Input Dims"))) for op in ops]


def captured_size(cap: Capture) -> int | None:
    """The tokens a capture was made for, from its GEMMs' rows (the most common), when nothing names it."""
    rows = Counter(m for _, _, op in cap.nodes if op is not None
                   and (m := gemm_tokens(op.get("name"), (op.get("args") or {}).get("Input Dims"))) is not None)
    return rows.most_common(1)[0][0] if rows else None


def eager_sizes(df, graph_rows) -> dict[int, frozenset]:
    """step → the leading dims of its eager (not replayed) ops' first inputs."""
    out: dict[int, set] = {}
    eager = df.loc[df.index.difference(graph_rows)]
    for step, dims in zip(eager["step"].tolist(), eager["op_dims"].tolist()):
        if isinstance(dims, (list, tuple)) and dims and isinstance(dims[0], (list, tuple)) and dims[0] \
                and isinstance(dims[0][0], int) and not isinstance(dims[0][0], bool):
            out.setdefault(step, set()).add(dims[0][0])
    return {k: frozenset(v) for k, v in out.items()}


class CaptureIndex:
    """Captures by (kernel count, name multiset or None when the capture does not name its kernels)."""

    def __init__(self, captures: list[Capture]):
        self.by_count: dict[int, list[tuple[Capture, int | None]]] = defaultdict(list)
        for c in captures:
            names = [n[1] for n in c.by_kind("kernel")]
            self.by_count[len(names)].append((c, hash(tuple(sorted(names))) if all(names) else None))
        self.gids = {c.gid for c in captures if c.gid is not None}
        self.memo: dict[tuple, tuple] = {}

    def candidates(self, n_kernels: int, names_key: int, gid: int | None) -> list[Capture]:
        """The captures a replay may replay: under its key; of its graph id when a capture has that id,
        else (its capture is not among tracekit's) the captures without an id: an engine's files."""
        by_id = gid is not None and gid in self.gids
        return [c for c, key in self.by_count.get(n_kernels, []) if (key is None or key == names_key)
                and (c.gid == gid if by_id else gid is None or c.gid is None)]

    def match(self, replay, gid: int | None, size: int | None, launches: int, hints: frozenset = frozenset()) -> tuple:
        """(capture, ops per row) or (None, reason) for one replay's rows (a DataFrame slice). ``hints``:
        the leading dims of the step's eager ops, for a step whose batch size no annotation gives."""
        kinds, names = tuple(replay["kind"]), tuple(replay["name"])
        kernel_names = [n for k, n in zip(kinds, names) if k == "kernel"]
        names_key = hash(tuple(sorted(kernel_names)))
        memo_key = (kinds, names, gid, size, launches > 1, hints)
        if memo_key not in self.memo:
            self.memo[memo_key] = self._match(replay, len(kernel_names), names_key, gid, size, launches, hints)
        return self.memo[memo_key]

    def _match(self, replay, n_kernels: int, names_key: int, gid, size, launches, hints) -> tuple:
        pool = self.candidates(n_kernels, names_key, gid)
        fits = [(c, p) for c in pool if (p := _pair(replay, c)) is not None]
        if not fits:
            if not self.by_count:
                return None, "no graph capture in the trace or its capture files"
            if not self.by_count.get(n_kernels):
                return None, f"no capture has {n_kernels} kernels"
            if gid in self.gids and not any(c.gid == gid for c, _ in self.by_count[n_kernels]):
                return None, f"graph #{gid} was captured with another kernel count"
            return None, f"kernel names differ from every capture of {n_kernels} kernels"
        fits = _narrow(fits, size, launches, hints)
        if len({repr(_signature(p)) for _, p in fits}) > 1:
            why = "the step names no batch size" if size is None else f"batch size {size} does not single one out"
            return None, f"{len(fits)} captures fit with different ops ({why})"
        return fits[0]


def _narrow(fits: list[tuple[Capture, list]], size: int | None, launches: int,
            hints: frozenset = frozenset()) -> list[tuple[Capture, list]]:
    """Fits giving different ops narrowed by batch size (else by the one captured size the step's eager
    ops show), then by mode; unchanged when a rule keeps none."""
    if len({repr(_signature(p)) for _, p in fits}) <= 1:
        return fits
    sizes = sorted({c.batch_size for c, _ in fits if c.batch_size is not None})
    if size is not None and sizes:
        target = next((s for s in sizes if s >= size), None)
        if target is not None:
            fits = [(c, p) for c, p in fits if c.batch_size == target]
    elif size is None and len(shown := set(sizes) & hints) == 1:
        fits = [(c, p) for c, p in fits if c.batch_size in shown]
    if not all((c.mode or "").upper() in ("FULL", "PIECEWISE") for c, _ in fits):
        return fits                     # modes only tell vLLM's FULL and PIECEWISE graphs apart
    want = "PIECEWISE" if launches > 1 else "FULL"
    moded = [(c, p) for c, p in fits if (c.mode or "").upper() == want]
    return moded or fits
