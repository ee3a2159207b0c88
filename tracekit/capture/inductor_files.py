"""Inductor template kernels named by their source file while a capture runs.

Inductor decorates its GEMM templates (``triton_tem_*``, max-autotune) with
``triton_heuristics.template(...)`` and, unlike its other kernels, passes no ``filename=__file__``
(torch 2.11-2.13). The kernel's profiler op then has no ``kernel_file`` (nor does its execution-trace
node), capture could not copy its source, and the execution-trace join had no pointer roles for it
(8 of 131 kernels a step of captures/h200/inductor's GPT-2 under max-autotune; 244 of 2,876 in issue
24's). Wrapping the decorator is not enough: compile workers build the kernel in another process and
pickle it back. So while a capture runs, ``AsyncCompile.triton(kernel_name, source_code)`` (every
Triton kernel of Inductor's output code goes through it, in the parent) is wrapped: a kernel it
returns without a ``filename`` gets the file PyCodeCache keeps that source in (``c<hash>.py`` under
Inductor's cache, named by the hash of the source), also when it comes back as a future. The wrapper
is installed when that torch module is imported (or at once, if it already is) and removed when the
capture ends.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

MODULE = "torch._inductor.async_compile"


def _source_path(source_code: str) -> str | None:
    """The ``c<hash>.py`` PyCodeCache loads ``source_code`` from (written there if missing)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.write(source_code)[1]


def name_kernel(obj, path: str) -> None:
    """Give a CachingAutotuner without ``filename`` the file ``path``; a future gets it on ``result()``."""
    if hasattr(obj, "filename") and hasattr(obj, "kernel_hash"):
        if not obj.filename:
            obj.filename = path
            if not obj.kernel_hash:
                obj.kernel_hash = os.path.splitext(os.path.basename(path))[0]
        return
    result = getattr(obj, "result", None)
    if callable(result) and not getattr(result, "_tracekit_names", False):
        def named_result(*args, **kwargs):
            kernel = result(*args, **kwargs)
            name_kernel(kernel, path)
            return kernel

        named_result._tracekit_names = True
        try:
            obj.result = named_result
        except (AttributeError, TypeError):
            pass


def patch_module(module, source_path=_source_path) -> list:
    """Wrap ``module.AsyncCompile.triton``; the undo callables."""
    cls = getattr(module, "AsyncCompile", None)
    triton = getattr(cls, "triton", None)
    if triton is None or getattr(triton, "_tracekit_wraps", None) is not None:
        return []

    def named_triton(self, kernel_name, source_code, *args, **kwargs):
        kernel = triton(self, kernel_name, source_code, *args, **kwargs)
        try:
            path = source_path(source_code)
        except Exception:                       # noqa: BLE001 - never break the user's compile
            return kernel
        if isinstance(path, str) and path.endswith(".py"):
            name_kernel(kernel, path)
        return kernel

    named_triton._tracekit_wraps = triton
    setattr(cls, "triton", named_triton)
    return [lambda: getattr(cls, "triton", None) is named_triton and setattr(cls, "triton", triton)]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders and patches the module once it has run."""

    def __init__(self, name: str, on_loaded):
        self.name, self.on_loaded = name, on_loaded

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        run = getattr(spec.loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module):
            run(module)
            self.on_loaded(module)

        spec.loader.exec_module = exec_module       # this spec's own loader instance
        return spec


def name_template_files(module_name: str = MODULE, source_path=_source_path):
    """Install the wrapper (now, or when ``module_name`` is imported); returns the function that
    removes it."""
    undo: list = []
    finder = None
    module = sys.modules.get(module_name)
    if module is not None:
        undo += patch_module(module, source_path)
    else:
        finder = _Finder(module_name, lambda m: undo.extend(patch_module(m, source_path)))
        sys.meta_path.insert(0, finder)

    def remove():
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for u in reversed(undo):
            u()
        undo.clear()

    return remove
