"""Tensors and op calls as the profiler records them (Kineto ``Input Dims``/``Input type``/...).

An ``OpCall`` is what every op record reads: the launching op's input shapes, dtypes, strides and
concrete values. ``Tensor`` is one tensor's shape and element type.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

# Kineto "Input type" strings -> (short dtype name, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4), "double": ("fp64", 8), "c10::Half": ("fp16", 2), "c10::BFloat16": ("bf16", 2),
    "long int": ("int64", 8), "long": ("int64", 8), "int64_t": ("int64", 8), "int": ("int32", 4),
    "short int": ("int16", 2), "short": ("int16", 2), "signed char": ("int8", 1), "unsigned char": ("uint8", 1),
    "bool": ("bool", 1), "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1), "c10::Float8_e5m2fnuz": ("fp8", 1), "c10::Float8_e8m0fnu": ("fp8", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4), "unsigned int": ("uint32", 4),
    "unsigned long": ("uint64", 8), "unsigned short": ("uint16", 2),
}
# c10::ScalarType numbers as Concrete Inputs record a dtype argument (_to_copy, _scaled_mm out_dtype)
SCALAR_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8),
                5: ("fp16", 2), 6: ("fp32", 4), 7: ("fp64", 8), 11: ("bool", 1), 15: ("bf16", 2),
                23: ("fp8", 1), 24: ("fp8", 1)}
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
_KERNEL_DTYPES = [(re.compile(p), d) for p, d in (
    (r"BFloat16|bfloat16|bf16", "bf16"), (r"c10::Half|\bhalf\b|fp16", "fp16"),
    (r"\bdouble\b", "fp64"), (r"<float\b|\bfloat>|\(float\b|, float\b", "fp32"))]


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str          # short name: fp32, bf16, ...
    itemsize: int
    stored: int | None = None   # fewer elements are read: a broadcast view's, a gather's source, a conv's windows
    partial: bool = False       # ``stored`` counts positions read of a tensor written whole (a strided conv's
                                # input), not a view of a smaller one: its producer wrote ``numel``

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes to read it once: a broadcast view's distinct elements, not its logical size."""
        return (self.numel if self.stored is None else self.stored) * self.itemsize


def _viewed(t: Tensor, strides) -> Tensor:
    """``t`` as read through ``strides``: an expand()ed view (a stride of 0) stores fewer elements."""
    if isinstance(strides, list) and len(strides) == len(t.shape) and 0 in strides:
        stored = math.prod(d for d, s in zip(t.shape, strides) if s != 0)
        if stored < t.numel:
            return Tensor(t.shape, t.dtype, t.itemsize, stored=stored)
    return t


def picked(source: Tensor, shape) -> Tensor:
    """The elements a gather reads from ``source`` to fill ``shape``: one per output element, but no
    more than ``source`` stores (an index that repeats, e.g. every token of type 0, reads a row once).
    Indices are otherwise taken as distinct: repeats in the data make the kernel read less."""
    shape = tuple(shape)
    have = source.numel if source.stored is None else source.stored
    if math.prod(shape) > have:
        return Tensor(shape, source.dtype, source.itemsize, stored=have)
    return Tensor(shape, source.dtype, source.itemsize)


@dataclass
class OpCall:
    """One launching op as recorded: ``dims``/``types``/``strides``/``concrete`` are Kineto's lists."""

    name: str
    dims: list
    types: list
    strides: list | None = None
    concrete: list | None = None
    kernel: str = ""        # the kernel name, when the op launched a kernel (hints tf32 etc.)
    kv_keys: int | None = None  # keys attention reads over the batch, from the engine's step annotation

    def tensor(self, i: int) -> Tensor | None:
        """Input ``i`` as a tensor, or None when it is not one (Scalar, None, list)."""
        if i >= len(self.dims) or i >= len(self.types) or not isinstance(self.types[i], str):
            return None                     # a TensorList's per-tensor dtypes (from an ET) are a list
        dtype = DTYPES.get(self.types[i])
        shape = self.dims[i]
        if dtype is None or not isinstance(shape, list) or any(not isinstance(d, int) for d in shape):
            return None
        strides = self.strides[i] if isinstance(self.strides, list) and i < len(self.strides) else None
        return _viewed(Tensor(tuple(shape), *dtype), strides)

    def tensors(self) -> list[Tensor]:
        return [t for t in (self.tensor(i) for i in range(len(self.dims))) if t is not None]

    def tensor_list(self, i: int) -> list[Tensor]:
        """Input ``i`` as a TensorList (Kineto records a list of shapes; the execution trace adds a list
        of per-tensor dtypes where Kineto recorded none); [] when it is not one."""
        shapes = self.dims[i] if i < len(self.dims) else None
        if not isinstance(shapes, list) or not shapes or not all(isinstance(s, list) for s in shapes):
            return []
        kinds = self.types[i] if i < len(self.types) else None
        if isinstance(kinds, list) and len(kinds) == len(shapes):     # per-tensor dtypes (from an ET)
            sizes = {v[0]: v[1] for v in DTYPES.values()}
            strides = self.strides[i] if isinstance(self.strides, list) and i < len(self.strides) else None
            per = strides if isinstance(strides, list) and len(strides) == len(shapes) else [None] * len(shapes)
            defined = [(s, k, st) for s, k, st in zip(shapes, kinds, per) if k != ""]    # '': an undefined entry
            if defined and all(k in sizes for _, k, _ in defined):
                return [_viewed(Tensor(tuple(s), k, sizes[k]), st) for s, k, st in defined
                        if all(isinstance(d, int) for d in s)]
        first = next((t for t in self.tensors()), None)
        dtype = first.dtype if first else self.kernel_dtype()
        opaque = _OPAQUE.search(self.kernel)
        if dtype is not None:
            size = {v[0]: v[1] for v in DTYPES.values()}[dtype]
        elif opaque:                      # ATen's cat kernel names only the element size
            dtype, size = f"opaque{opaque.group(1)}", int(opaque.group(1))
        else:
            raise ValueError("TensorList dtype not recorded and not in the kernel name")
        return [Tensor(tuple(s), dtype, size) for s in shapes if all(isinstance(d, int) for d in s)]

    def kernel_dtype(self) -> str | None:
        """The element type a kernel's template arguments name (c10::BFloat16, c10::Half, float)."""
        for pattern, dtype in _KERNEL_DTYPES:
            if pattern.search(self.kernel):
                return dtype
        return None

    def value(self, i: int):
        """Concrete input ``i`` parsed as a Python literal ('False' -> False, '[1, 1]' -> [1, 1]), or None."""
        if not self.concrete or i >= len(self.concrete) or self.concrete[i] in ("", None):
            return None
        text = self.concrete[i]
        if not isinstance(text, str):
            return text
        try:
            return ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            return {"True": True, "False": False, "None": None}.get(text.strip(), text)


def need(t: Tensor | None, what: str) -> Tensor:
    """The tensor, or a ValueError naming what was missing (turned into a reason by cost_of)."""
    if t is None:
        raise ValueError(f"{what} not recorded as a tensor")
    return t


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting of shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8")


def result_dtype(tensors: list[Tensor]) -> Tensor | None:
    """The tensor whose dtype PyTorch's type promotion gives an elementwise result: among the floating
    tensors, the widest one with dimensions wins over 0-dim ones (a wrapped Python number, recorded as a
    0-dim ``double``, does not promote a bf16 tensor, and makes integer tensors float32, the default
    dtype); without floats, the first tensor."""
    floats = [t for t in tensors if t.dtype in FLOAT_DTYPES]
    if not floats:
        return tensors[0] if tensors else None
    shaped = [t for t in floats if t.shape]
    if shaped:
        return max(shaped, key=lambda t: t.itemsize)
    if any(t.shape for t in tensors):              # integer tensors with a Python float: the default dtype
        return Tensor((), "fp32", 4)
    return max(floats, key=lambda t: t.itemsize)
