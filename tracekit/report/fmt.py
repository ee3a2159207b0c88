"""How numbers and kernel names are written for people: µs, counts, gaps, bytes, short names."""

from __future__ import annotations

import math
import re


def short_name(name: str, width: int = 72) -> str:
    """A kernel name fit for one line: no ``void ``, no ``(anonymous namespace)::``, no trailing argument
    list, at most ``width`` characters."""
    s = str(name)
    if s.startswith("void "):
        s = s[5:]
    s = s.replace("(anonymous namespace)::", "")
    if s.endswith(")") and "::" in s:
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i].rstrip() or s
                break
    return clip(s, width)


def clip(text, width: int = 120) -> str:
    """Trace text for one display line: control characters as spaces, at most ``width`` characters."""
    s = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in str(text)[: width + 1])
    return s if len(s) <= width else s[: width - 1] + "…"


def fmt_us(us) -> str:
    """A time in µs, the unit of every figure tracekit writes (never ms, s or ns): 2 decimals below
    1,000 µs ('0.66 µs', '822.57 µs'), whole µs with separators from there ('9,720 µs', '1,293,300 µs'),
    '<0.01 µs' for a positive time that 2 decimals would show as zero."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "-"
    if abs(us) >= 999.995:
        return f"{us:,.0f} µs"
    if 0 < us < 0.005:
        return "<0.01 µs"
    return f"{us:.2f} µs"


def fmt_count(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def fmt_gap(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}×"


def _shapes(dims) -> str:
    if not isinstance(dims, list):
        return ""
    return " ".join("x".join(map(str, d)) if isinstance(d, list) and d and all(isinstance(v, int) for v in d)
                    else "" for d in dims).strip()


def table_width(widths: list[int]) -> int:
    """Width rich gives a table without an outer edge: each cell padded by one space on both sides,
    one separator between columns, the outer padding kept."""
    return sum(widths) + 3 * (len(widths) - 1) + 2 if widths else 0


def cell_width(column: str, values: list[str]) -> int:
    """The widest line of a column: its header and every cell (a cell may hold several lines)."""
    return max([len(column)] + [max((len(x) for x in v.split("\n")), default=0) for v in values])


def fit_columns(width: dict[str, int], order: tuple, always: set, room: int) -> list[str]:
    """The columns of ``order`` (widths in ``width``) that fit in ``room`` cells, kept in priority order:
    those in ``always`` stay, then each next one that still fits."""
    kept = [c for c in order if c in always]
    for c in order:
        if c not in always and table_width([width[k] for k in kept + [c]]) <= room:
            kept.append(c)
    return [c for c in order if c in kept]


def fmt_bytes(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return fmt_count(float(x)) + "B"


_OPEN, _CLOSE = "<({[", ">)}]"


def compact_name(name: str, width: int = 48) -> str:
    """A kernel name for a narrow column: ``short_name``, then namespaces dropped and whatever sits two
    brackets deep written as ``…`` (``elementwise_kernel<128, 4, gpu_kernel_impl<…>(…)>``); a name whose
    brackets do not balance (``Memcpy HtoD (Pinned -> Device)``) is only shortened."""
    s = short_name(name, 4096)
    out, depth = [], 0
    for c in s:
        if c in _OPEN:
            depth += 1
            if depth == 2:
                out.append(c + "…")
            elif depth < 2:
                out.append(c)
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:
                return clip(_QUALIFIER.sub("", s) if "<" not in s else s, width)
            if depth < 2:
                out.append(c)
        elif depth < 2:
            out.append(c)
    if depth != 0:
        return clip(s, width)
    s = _QUALIFIER.sub("", "".join(out)).replace(", ", ",").replace(" >", ">")
    if len(s) > width > 12 and "<" not in s and "(" not in s:     # a plain name: its tail tells variants apart
        tail = (width - 1) * 2 // 5
        return clip(s[: width - 1 - tail] + "…" + s[-tail:], width)
    return clip(s, width)


_QUALIFIER = re.compile(r"(?<![\w:])(?:[A-Za-z_]\w*::)+")


STEP_ROWS = 40           # per-step tables for people show at most this many steps: the first and last halves


def step_cells(rows: list, columns, fill) -> tuple[dict, int, str]:
    """The cells of a per-step table for people: ``fill(row)`` gives {column: text} for each row shown
    (``shown_steps``), an elided stretch one row ("N steps", "…"); returns the cells, the number of
    table rows and the title's note."""
    shown, note = shown_steps(len(rows))
    cells: dict = {c: [] for c in columns}
    for i in shown:
        values = fill(rows[i]) if i >= 0 else \
            {c: f"{len(rows) - len(shown) + 1:,} steps" if c == "step" else "…" for c in columns}
        for c in columns:
            cells[c].append(values[c])
    return cells, len(shown), note


def shown_steps(n: int) -> tuple[list[int], str]:
    """Which of ``n`` per-step rows a table for people shows (all, or the first and last STEP_ROWS // 2
    around one elided row, ``-1``), and the note its title gets ("" when all are shown)."""
    if n <= STEP_ROWS:
        return list(range(n)), ""
    half = STEP_ROWS // 2
    return (list(range(half)) + [-1] + list(range(n - half, n)),
            f" ({STEP_ROWS} of {n:,} steps: the first and last {half}; --format json or csv lists every step)")
