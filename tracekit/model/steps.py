"""A trace's steps as columns: ``Steps`` reads like a list of ``Step`` but holds three NumPy arrays and
a ``StepNames``, not an object per step (issue 27: 100k ProfilerSteps held 100k ``Step`` objects and
their names, about 19 MB, for 13 MB of JSON).

``StepNames`` keeps names of the form ``<prefix><n>`` with one prefix (``ProfilerStep#0``,
``ProfilerStep#1``...) as that prefix and an integer array, and makes each name when read; any other
set of names is kept as a list. The loader fills one while reading, so the decoded names need not
outlive their events.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tracekit.model.rows import ListLike, Values


@dataclass(slots=True)
class Step:
    """One step: a ProfilerStep#N range, a --step-marker match, or the whole trace."""

    index: int
    name: str
    start_us: float
    end_us: float


_NUMBERED = re.compile(r"(.*?)(0|-?[1-9][0-9]{0,17})")      # a name and its decimal tail, as str(int) writes it


class StepNames(ListLike):
    """Step names, in order: ``prefix`` and ``numbers`` while every name is ``prefix + str(number)``
    (``texts`` None), else the names themselves in ``texts``. Items are str; a slice is a list."""

    __slots__ = ("prefix", "numbers", "texts")

    def __init__(self, names: Iterable[str] = ()):
        self.prefix, self.numbers, self.texts = None, array("q"), None
        self.extend(names)

    @classmethod
    def of(cls, names) -> "StepNames":
        return names if isinstance(names, StepNames) else cls(names)

    def __len__(self) -> int:
        return len(self.numbers) if self.texts is None else len(self.texts)

    def __getitem__(self, i):
        if self.texts is not None:
            return self.texts[i]
        if isinstance(i, slice):
            return [f"{self.prefix}{k}" for k in self.numbers[i]]
        return f"{self.prefix}{self.numbers[i]}"

    def __iter__(self):
        return iter(self.texts) if self.texts is not None else (f"{self.prefix}{k}" for k in self.numbers)

    def __iadd__(self, names):
        self.extend(names)
        return self

    def extend(self, names) -> None:
        if self.texts is not None:
            self.texts.extend(names)
            return
        if isinstance(names, StepNames) and names.texts is None and (names.prefix == self.prefix or not self):
            self.prefix = names.prefix if not self else self.prefix
            self.numbers.extend(names.numbers)
            return
        names = names if isinstance(names, list) else list(names)
        got = self._parse(names)
        if got is None:                            # a name of another form: every name kept as text
            self.texts = [*self, *names]
            self.prefix, self.numbers = None, array("q")
        else:
            self.numbers.extend(got)

    def _parse(self, names: list) -> list[int] | None:
        """The numbers of ``names`` under this prefix (taken from the first name when none yet), or None
        when one is not ``prefix + str(number)`` exactly (int() also reads "+1", "01", " 1", "1_0")."""
        if not names:
            return []
        prefix = self.prefix
        if prefix is None:
            m = _NUMBERED.fullmatch(names[0]) if isinstance(names[0], str) else None
            if m is None:
                return None
            prefix = m.group(1)
        cut = len(prefix)
        try:
            numbers = [int(n[cut:]) if n.startswith(prefix) else None for n in names]
            array("q", numbers)                    # within int64, no None
        except (TypeError, ValueError, OverflowError, AttributeError):
            return None
        if any(f"{prefix}{k}" != n for k, n in zip(numbers, names)):
            return None
        self.prefix = prefix
        return numbers

    def take(self, positions) -> "StepNames":
        """The names at ``positions`` (an integer array), as a ``StepNames``."""
        out = StepNames()
        if self.texts is not None:
            out.texts = [self.texts[k] for k in np.asarray(positions, dtype=np.int64).tolist()]
        else:
            out.prefix = self.prefix
            out.numbers = array("q", np.frombuffer(self.numbers, dtype=np.int64)[positions].tobytes()) \
                if len(self.numbers) else array("q")
        return out

    def codes(self) -> np.ndarray:
        """An int64 per name, equal where the names are equal."""
        if self.texts is None:
            return np.frombuffer(self.numbers, dtype=np.int64).copy() if len(self.numbers) else np.zeros(0, np.int64)
        seen: dict = {}
        return np.array([seen.setdefault(n, len(seen)) for n in self.texts], dtype=np.int64)

    def __repr__(self) -> str:
        return f"StepNames({len(self)}: {self[:3]}{'...' if len(self) > 3 else ''})"


class Steps(ListLike):
    """The steps, in order: ``index`` (int64), ``start_us``, ``end_us`` (float64) and ``names``. Reading
    an item gives a new ``Step``: a change to it is not kept (``set_end`` moves a step's end); a slice
    is a ``Steps``."""

    __slots__ = ("index", "start_us", "end_us", "names")

    def __init__(self, index, names, start_us, end_us):
        self.index = np.asarray(index, dtype=np.int64)
        self.start_us = np.array(start_us, dtype=float)
        self.end_us = np.array(end_us, dtype=float)
        self.names = StepNames.of(names)
        if not len(self.index) == len(self.names) == len(self.start_us) == len(self.end_us):
            raise ValueError("Steps: index, names, start_us and end_us differ in length")

    @classmethod
    def of(cls, steps: Iterable[Step]) -> "Steps":
        if isinstance(steps, Steps):
            return steps
        steps = list(steps)
        return cls([s.index for s in steps], [s.name for s in steps], [s.start_us for s in steps],
                   [s.end_us for s in steps])

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            at = np.arange(len(self))[i]
            return Steps(self.index[at], self.names.take(at), self.start_us[at], self.end_us[at])
        k = range(len(self))[i]                              # negative indices; IndexError past the end
        return Step(int(self.index[k]), self.names[k], float(self.start_us[k]), float(self.end_us[k]))

    def __iter__(self):
        for k, name, start, end in zip(self.index.tolist(), self.names, self.start_us.tolist(),
                                       self.end_us.tolist()):
            yield Step(k, name, start, end)

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self[:3]))
        return f"Steps({len(self)}: {shown}{', ...' if len(self) > 3 else ''})"

    def or_whole(self) -> "Steps":
        """These steps, or, when there are none, the whole trace as one: step 0, "whole trace", from -inf
        to inf (the one row of per-step figures a trace without steps has)."""
        return self if len(self) else Steps([0], ["whole trace"], [-np.inf], [np.inf])

    def indices(self) -> list[int]:
        return self.index.tolist()

    def name_list(self) -> list[str]:
        return list(self.names)

    def name_of(self, index: int, default: str | None = None) -> str | None:
        """The name of the step whose ``index`` is given (``default`` when none is)."""
        at = np.flatnonzero(self.index == index)
        return self.names[int(at[0])] if len(at) else default

    def column(self, field: str) -> ListLike:
        """``field`` ("index", "name", "start_us", "end_us") of every step as a sequence of Python values
        that holds no list of its own."""
        return self.names if field == "name" else Values(getattr(self, field))

    def set_end(self, k: int, end_us: float) -> None:
        """Move the ``k``-th step's end (the loader's trim of code after the loop)."""
        self.end_us[k] = end_us
