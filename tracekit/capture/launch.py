"""``tracekit capture --nproc N script.py``: one process per rank, as ``torchrun --nproc-per-node N``
starts them, each an ordinary one-process capture into ``BUNDLE/rankR/``.

The launcher itself imports no torch and runs no user code: it prepares the bundle folder, writes the
top ``meta.json`` (``"state": "running"``), starts ``python -m tracekit capture script -o BUNDLE/rankR``
per rank with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
ROLE_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT=a free local port, so ``init_process_group`` with the
default ``env://`` works unchanged) and waits. Each rank's own capture writes its bundle on every exit
(sys.exit, exceptions, ``os._exit``, SIGTERM), so a failing rank loses nothing. When a rank fails, the
others get ``grace_s`` to finish or fail on their own (a collective with a dead peer errors out in gloo
and NCCL), then SIGTERM (their bundles are still written), then after ``kill_s`` SIGKILL. SIGINT,
SIGTERM and SIGHUP sent to tracekit are passed to every rank.

The exit code is the worst rank's: the code of the first rank that failed on its own (the root cause;
a rank that tracekit stopped afterwards does not outrank it), else that of a stopped rank, else 0.
A rank killed by a signal counts as 128 + signal, as a shell reports it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tracekit import bundle
from tracekit.capture.runner import load_script
from tracekit.capture.session import _say
from tracekit.errors import TracekitError
from tracekit.version import __version__

CHILD_ENV = "TRACEKIT_RANK_OF"          # set in each rank's environment: the launcher's bundle folder


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shell_code(returncode: int) -> int:
    """Popen's return code as a shell reports it: killed by signal S → 128 + S."""
    return 128 - returncode if returncode < 0 else returncode


def rank_environment(rank: int, nproc: int, port: int, out_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
                "ROLE_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                "TORCHELASTIC_RUN_ID": "tracekit", CHILD_ENV: str(out_dir)})
    return env


def capture_ranks(script: str, args: list[str], out: str | None, nproc: int, *, steps: int | None = None,
                  warmup: int = 0, step_fn: str | None = None, quiet: bool = False, force: bool = False,
                  execution_trace: bool = True, grace_s: float = 30.0, kill_s: float = 10.0,
                  modules: bool = True) -> int:
    """Run ``nproc`` ranks of ``python script args``, each captured into ``out/rankR``; the worst exit code."""
    if nproc < 1:
        raise TracekitError("--nproc must be at least 1")
    if steps is not None and steps < 1:
        raise TracekitError("--steps must be at least 1")
    if warmup < 0:
        raise TracekitError("--warmup must be 0 or more")
    path, _, _ = load_script(script)                         # one-line errors before anything starts
    out_dir = (Path(out) if out else Path(f"{path.stem}.tracekit")).absolute()
    bundle.prepare_out(out_dir, force)
    port = free_port()
    meta = {"framework": "torch", "command": [sys.executable, script, *args], "script": str(path.resolve()),
            "args": list(args), "cwd": str(Path.cwd()), "git": bundle.git_revision(path.resolve().parent),
            "launcher": f"tracekit capture --nproc {nproc}", "world_size": nproc,
            "master_addr": "127.0.0.1", "master_port": port, "tracekit_version": __version__,
            "ranks": [{"rank": r, "bundle": bundle.rank_dir_name(r), "exit_code": None} for r in range(nproc)]}
    write_meta(out_dir, meta, "running")
    opts = [*(["--steps", str(steps)] if steps else []), *(["--warmup", str(warmup)] if warmup else []),
            *(["--step-fn", step_fn] if step_fn else []), *(["--quiet"] if quiet else []),
            *([] if execution_trace else ["--no-et"]), *([] if modules else ["--no-modules"])]
    _say(quiet, f"starting {nproc} ranks (MASTER_ADDR=127.0.0.1 MASTER_PORT={port}) into {out_dir}/rank*/")
    procs: list[subprocess.Popen] = []
    ended: dict[int, tuple[float, int]] = {}                 # rank → (when, shell exit code)
    stopped: set[int] = set()                                # ranks tracekit sent SIGTERM/SIGKILL
    received: list[int] = []

    def pass_on(signum, frame):
        received.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    saved = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        for r in range(nproc):
            cmd = [sys.executable, "-m", "tracekit", "capture", script, "-o",
                   str(out_dir / bundle.rank_dir_name(r)), *opts, "--", *args]
            procs.append(subprocess.Popen(cmd, env=rank_environment(r, nproc, port, out_dir)))
        first_failure = term_at = None
        while len(ended) < nproc:
            now = time.monotonic()
            for r, p in enumerate(procs):
                if r not in ended and p.poll() is not None:
                    ended[r] = (now, shell_code(p.returncode))
                    if ended[r][1] != 0 and first_failure is None:
                        first_failure = now
                        _say(quiet, f"rank {r} exited {ended[r][1]}; the other ranks get {grace_s:g} s "
                                    "to end on their own")
            alive = [r for r in range(nproc) if r not in ended]
            if alive and first_failure is not None and term_at is None and now - first_failure >= grace_s:
                _say(quiet, f"stopping rank(s) {', '.join(map(str, alive))} (SIGTERM; their bundles are written)")
                for r in alive:
                    stopped.add(r)
                    procs[r].send_signal(signal.SIGTERM)
                term_at = now
            if alive and term_at is not None and now - term_at >= kill_s:
                for r in alive:
                    procs[r].kill()
            time.sleep(0.05)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    meta["ranks"] = [rank_record(out_dir, r, ended[r][1], r in stopped) for r in range(nproc)]
    meta["exit_code"] = worst_exit_code(ended, stopped)
    meta["signals_passed_on"] = received
    write_meta(out_dir, meta, "done")
    codes = ", ".join(f"rank {r}: {ended[r][1]}" for r in range(nproc))
    _say(quiet, f"wrote {out_dir} ({nproc} ranks; exit codes {codes}; tracekit exits {meta['exit_code']})")
    return meta["exit_code"]


def worst_exit_code(ended: dict[int, tuple[float, int]], stopped: set[int]) -> int:
    """The first rank to fail on its own (ties: lowest rank), else the first stopped one, else 0."""
    for pool in ([r for r in ended if r not in stopped], list(stopped)):
        failed = sorted((ended[r][0], r) for r in pool if ended[r][1] != 0)
        if failed:
            return ended[failed[0][1]][1]
    return 0


def rank_record(out_dir: Path, rank: int, code: int, stopped: bool) -> dict:
    folder = out_dir / bundle.rank_dir_name(rank)
    own = bundle.read_meta(folder) or {}
    return {"rank": rank, "bundle": folder.name, "exit_code": code, "stopped_by_tracekit": stopped,
            "state": own.get("state"), "trace": (f"{folder.name}/{own['trace']}" if own.get("trace") else None),
            "steps_recorded": own.get("steps_recorded"), "step_rule": own.get("step_rule")}


def write_meta(out_dir: Path, meta: dict, state: str) -> None:
    meta["state"] = state
    (out_dir / bundle.META).write_text(json.dumps(meta, indent=1, default=str) + "\n")


def launcher_rank_out(out: str | None, script: str) -> str | None:
    """Under an outside launcher (torchrun sets RANK and WORLD_SIZE; not one of our own ranks): the
    rank's own folder ``OUT/rankR``, so that the ranks do not write over each other. Else ``out``."""
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if os.environ.get(CHILD_ENV) or not (rank.isdigit() and world.isdigit()) or int(world) < 2:
        return out
    base = Path(out) if out else Path(f"{Path(script).stem}.tracekit")
    return str(base / bundle.rank_dir_name(int(rank)))
