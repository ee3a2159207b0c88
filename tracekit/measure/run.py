"""Measure one step in every scope, in an order that keeps the riskier parts last: first call, warm-up,
③ single call + sync, ② continuous, ④ end to end, energy, ① kernel time hot/cold (profiled), and ②
under CUDA-graph replay (a failed capture can leave state behind). Energy comes before the profiler:
Kineto leaves CUPTI attached once it stops (unless ``TEARDOWN_CUPTI=1``), which adds host time to every
later launch (a host-bound decode's calls took 1.36x longer in the energy window than back to back).
Then (``script.Measurer``) one more call, whose result the script gets, with the arguments as one call
leaves them."""

from __future__ import annotations

import time

from tracekit.errors import say_error
from tracekit.measure.energy import measure_energy, open_nvml
from tracekit.measure.scopes import (calls_for, continuous, end_to_end, graph_replay, scope, single_call,
                                     unavailable)
from tracekit.measure.step import Clock, Step, cache_bytes, describe
from tracekit.version import __version__

SCHEMA = 1
ORDER = ("kernel_hot", "kernel_cold", "continuous", "graph_replay", "single_call", "end_to_end", "first_call")


def _say(options, msg: str) -> None:
    if not options.quiet:
        say_error(f"tracekit: {msg}\n")


def _guard(name: str, label: str, fn):
    """Run one scope; an exception becomes the scope's reason (the others still run)."""
    try:
        return fn()
    except Exception as exc:                     # noqa: BLE001  (said in the scope)
        return unavailable(name, label, f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}")


def measure_step(fn, args: tuple, kwargs: dict, o, first_call_s: float | None, final, step_rule: str,
                 module=None) -> tuple[Step, dict]:
    """The step (``step.prep()`` then ``final(*args, **kwargs)`` is the call the script sees, made by the
    caller once the document is written) and the measurement document."""
    import torch

    from tracekit.capture.environment import describe_environment

    step = Step(torch, fn, args, kwargs, o.reset_args, module)
    clock = Clock(torch, step.device)
    _say(o, f"measuring the step ({step_rule}) on {step.device}; timer: {clock.kind}")
    step.snapshot()
    clock.sync()
    if first_call_s is None:
        t0 = time.perf_counter()
        step.run()
        clock.sync()
        first_call_s = time.perf_counter() - t0
        first_note = "the step's first call in the script, compile and autotuning included"
    else:
        step.run()                               # the module's second call: see what the step changes
        first_note = "the root module's first top-level call (timed through forward hooks), compile included"
    step.detect_mutation()
    for _ in range(o.warmup):
        step.call()
    clock.sync()
    flush, flush_src = cache_bytes(torch, step.device, None)
    flush_bytes = o.flush_bytes or 2 * flush

    single = _guard("single_call", "③ single call + sync", lambda: single_call(step, clock, o.repeats))
    per_call = (single.get("median_us") or 1.0) / 1e6
    calls = o.calls or calls_for(per_call, o.target_s)
    cont = _guard("continuous", "② continuous (back to back)", lambda: continuous(step, clock, o.repeats, calls))
    e2e = _guard("end_to_end", "④ end to end", lambda: end_to_end(step, clock, o.repeats))
    energy = _energy(step, clock, o, cont)       # before the profiler: CUPTI stays attached after it
    prof = None
    if o.profile:
        _say(o, f"recording {o.profile_steps} hot + {o.profile_steps} cold steps for kernel time and the floor")
        from tracekit.measure.profiled import profile

        try:
            prof = profile(step, clock, o.profile_steps, o.profile_steps, flush_bytes, o.keep_trace, o.device, o.spec)
        except Exception as exc:                 # noqa: BLE001
            prof = {"error": f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"}
    graph = (_guard("graph_replay", "② continuous under CUDA-graph replay",
                    lambda: graph_replay(step, clock, o.repeats, calls)) if o.graph
             else unavailable("graph_replay", "② continuous under CUDA-graph replay", "--no-graph"))
    first = scope("first_call", "⑤ first call", "wall clock (time.perf_counter), synchronized after it",
                  [first_call_s], note=first_note + "; one call: no spread")
    kernel = (prof or {}).get("scopes") or [
        unavailable(n, label, (prof or {}).get("error") or "--no-profile")
        for n, label in (("kernel_hot", "① kernel time, hot cache"), ("kernel_cold", "① kernel time, cold cache"))]
    floor = ({"us": o.floor_us, "source": "--floor-us"} if o.floor_us is not None
             else (prof or {}).get("floor") or {"us": None, "source": None, "note": "no profile: no floor"})
    by_name = {s["scope"]: s for s in [*kernel, cont, graph, single, e2e, first]}
    scopes = [by_name[n] for n in ORDER]
    for s in scopes:
        s["x_floor"] = (s["median_us"] / floor["us"]) if s.get("median_us") and floor.get("us") else None

    env = describe_environment(torch)
    doc = {
        "schema": SCHEMA, "tracekit_version": __version__, "command": o.command, "step_rule": step_rule,
        "step": "one call of the step function" if step_rule.startswith("step-fn") else
                "one call of the root nn.Module (forward only: what runs between its calls is not repeated)",
        "device": {"device": str(step.device), "name": env.get("device_name"), "timer": clock.kind,
                   "cache_bytes": flush, "cache_source": flush_src, **{k: env.get(k) for k in (
                       "torch_version", "cuda_version", "hip_version", "python_version", "platform", "date")},
                   "properties": env.get("devices", [])[:1]},
        "settings": {"warmup": o.warmup, "repeats": o.repeats, "calls_per_continuous_repeat": calls,
                     "profile_steps_hot": o.profile_steps if o.profile else 0,
                     "profile_steps_cold": o.profile_steps if o.profile else 0, "flush_bytes": flush_bytes,
                     "energy_window_s": o.energy_window_s if o.energy else None,
                     "tokens_per_step": o.tokens_per_step},
        "arguments": [{"name": n, **describe(t), "mutated": n in step.mutated} for n, t in step.tensors],
        "reset": step.reset_info(), "floor": floor, "scopes": scopes,
        "breakdown": (prof or {}).get("breakdown"), "profile_trace": (prof or {}).get("trace"),
        "energy": energy, "warnings": step.notes + (prof or {}).get("warnings", []) + _order_warnings(by_name),
    }
    return step, doc


def _energy(step: Step, clock: Clock, o, cont: dict) -> dict:
    if not o.energy:
        return {"available": False, "reason": "--no-energy"}
    nvml, why = open_nvml(step.torch, step.device)
    if nvml is None:
        return {"available": False, "reason": why}
    per_call = (cont.get("median_us") or 1e3) / 1e6
    _say(o, f"energy: repeating the step for {o.energy_window_s:g} s or more")

    def run_calls(n: int) -> None:
        for _ in range(n):
            step.call()

    try:
        return measure_energy(run_calls, clock.sync, nvml, o.energy_window_s, per_call, o.tokens_per_step)
    except Exception as exc:                     # noqa: BLE001
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _order_warnings(s: dict) -> list[str]:
    """Orders that must hold between scopes (10 % allowed for noise); a violation is said, not hidden."""
    out = []

    def med(name):
        return s.get(name, {}).get("median_us")

    pairs = (("continuous", "single_call", "continuous per call is slower than a single call + sync"),
             ("single_call", "first_call", "the first call was faster than a later single call"),
             ("kernel_hot", "continuous", "kernel time (hot) exceeds the continuous time per call"))
    for low, high, what in pairs:
        if low == "kernel_hot" and "CUPTI" not in s.get(low, {}).get("timer", ""):
            continue                             # CPU op time under the profiler is slowed by it
        if med(low) is not None and med(high) is not None and med(low) > 1.1 * med(high):
            out.append(f"{what} ({med(low):.1f} > {med(high):.1f} us): a noisy machine, or a step whose "
                       "repeats do different work")
    return out
