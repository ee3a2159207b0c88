"""The console script's entry point (``tracekit``, ``python -m tracekit``).

The commonest call, ``tracekit explain TRACE -f json`` with only plain options (``--no-cache``,
``--device``, ``--spec``, ``--step-marker``, ``--skip-steps``, ``--et``, ``--graph-captures``), is parsed
here by hand and run without importing typer (whose start-up, with the pydantic adapter it builds per
option, was ~0.15 CPU s of a 1.3 s explain: docs/performance.md); every other command line, or any form
this parser is unsure of, goes to the typer app unchanged (``cli.app``). Both paths call the same
``cli.explain.explain_run`` and map errors the same way (``cli.guard``), so stdout, stderr and the
exit status are the same (tests/test_fast_path.py).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Optional

VALUED = {"--step-marker": "step_marker", "--device": "device", "--spec": "spec", "--skip-steps": "skip_steps",
          "--et": "et", "--graph-captures": "graph_captures"}
FLAGS = {"--no-cache": ("no_cache", True), "--cache": ("no_cache", False)}
FORMAT = ("-f", "--format")


def fast_explain(argv: list[str]) -> Optional[dict]:
    """``explain_run``'s arguments when ``argv`` is ``explain TRACE -f json`` with only the plain options
    above, each at most once, in any order; None for anything else (typer parses it)."""
    if argv[:1] != ["explain"]:
        return None
    args: dict = {"format": None}
    rest, seen = argv[1:], set()
    k = 0
    while k < len(rest):
        word = rest[k]
        name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in seen:
            return None
        seen.add(name)
        if name in FLAGS and not eq:
            key, flag = FLAGS[name]
            if key in args:
                return None                   # --cache and --no-cache both: typer decides
            args[key] = flag
            k += 1
            continue
        if name in VALUED or name in FORMAT:
            if not eq:
                if k + 1 >= len(rest):
                    return None
                value, k = rest[k + 1], k + 1
            if not value or value.startswith("-"):
                return None
            if name in FORMAT:
                if value != "json" or args["format"] is not None:
                    return None
                args["format"] = value
            elif name == "--skip-steps":
                if not (value.isascii() and value.isdigit()):
                    return None
                args["skip_steps"] = int(value)
            else:
                args[VALUED[name]] = value
            k += 1
            continue
        if word.startswith("-") or not word or "trace" in args:
            return None                       # another option, an empty word, a second argument
        args["trace"] = word
        k += 1
    if args["format"] != "json" or "trace" not in args:
        return None
    return args


def run(args: Optional[list[str]] = None) -> int:
    """Run the CLI on ``args`` (default: ``sys.argv[1:]``) and return the exit status, as
    ``cli.app.run`` does (warnings held to the end: tracekit.cli.held_warnings)."""
    argv = sys.argv[1:] if args is None else [str(a) for a in args]
    return _dispatch(argv, fast_explain(argv))


def _dispatch(argv: list[str], fast: Optional[dict]) -> int:
    """``argv`` run by the fast path when ``fast`` (its parsed arguments), else by the typer app."""
    if fast is None:
        from tracekit.cli.app import run as typer_run
        return typer_run(argv)
    from tracekit.cli.held_warnings import held_warnings

    with held_warnings() as state:
        state["code"] = code = _run_fast(fast, argv)
    return code


def _run_fast(fast: dict, argv: list[str]) -> int:
    """``explain_run(**fast)`` with what typer's own layer does around a command (an EOFError is an
    interruption, a KeyboardInterrupt exits 130 quietly, a broken pipe exits 1 with stdout and stderr
    silenced), then ``cli.app._run``'s error mapping (``cli.guard.error_status``)."""
    from tracekit.cli.explain import explain_run
    from tracekit.cli.guard import error_status, prepare_stdout
    from tracekit.errors import reset_warnings

    prepare_stdout(argv)
    reset_warnings()
    try:
        try:
            code = explain_run(**fast)
            return code if isinstance(code, int) else 0
        except EOFError:
            print(file=sys.stderr)
            print("tracekit: interrupted", file=sys.stderr)
            return 130
        except KeyboardInterrupt:
            return 130
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _pacify()
            return 1
    except BaseException as exc:              # noqa: B036  (error_status re-raises what is not ours)
        return error_status(exc, argv)


def _pacify() -> None:
    """stdout and stderr wrapped as click wraps them after a broken pipe: later flushes stay quiet."""
    try:
        from typer._click.utils import PacifyFlushWrapper
    except ImportError:
        from click.utils import PacifyFlushWrapper
    sys.stdout = PacifyFlushWrapper(sys.stdout)
    sys.stderr = PacifyFlushWrapper(sys.stderr)


def main() -> None:
    """Console-script entry point: one line on stderr and exit 2 for unusable input.

    On the fast path the process ends with the command: the cycle collector stays off from the start
    (explain pauses it anyway; its scans of pandas' import cost ~0.03 s), numpy's BLAS starts one thread,
    not one per core (explain does no linear algebra; the pool's start-up spun ~0.1 CPU s on a 2-core
    box), unless the environment says otherwise, and, once stdout and stderr
    are flushed, the process exits without tearing down its heap (freeing the tables, modules and a
    last collection: ~0.1 s of a 1.1 s explain), unless a thread or a worker process is still about."""
    argv = sys.argv[1:]
    fast = fast_explain(argv)
    if fast is None:
        sys.exit(_dispatch(argv, None))
    import gc

    gc.disable()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")    # numpy's BLAS threads: started at import, never used
    code = _dispatch(argv, fast)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        sys.exit(code)                        # the usual exit says what it says about a stream gone
    threading = sys.modules.get("threading")
    if (threading is None or threading.active_count() == 1) and "multiprocessing" not in sys.modules:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
