"""Options several commands share (explain, check, diff, ranks)."""

import typer

StepMarker = typer.Option(None, "--step-marker", help="Regex naming the event that marks one step "
                          "(default: ProfilerStep#N, else the whole trace is one step).")
DeviceOpt = typer.Option(None, "--device", help="Device spec id to use (e.g. h200), overriding the trace's.")
SpecOpt = typer.Option(None, "--spec", help="A device spec: a TOML file (e.g. your measured ceilings) or a "
                       "spec id (e.g. h200-measured).")
NoCacheOpt = typer.Option(False, "--no-cache/--cache", metavar="", help="Read the trace itself, not the normalised table kept from "
                          "an earlier run (cache: $TRACEKIT_CACHE_DIR, else ~/.cache/tracekit)")
WorkersOpt = typer.Option(None, "--workers", help="Multi-rank folders: ranks loaded at once on this machine "
                          "(default: one per CPU; 1: one after another in this process)")
GraphCapturesOpt = typer.Option(None, "--graph-captures", help="A serving engine's graph-capture traces (a folder: "
                                "SGLang bs_*_rankN, vLLM graph_capture_rank_N.*, execution_details.json; or one "
                                "file) to cost graph replays from; default: capture_traces/ beside the trace")
DaskOpt = typer.Option(None, "--dask", help="Multi-rank folders: run the per-rank stage on Dask distributed: a "
                       "scheduler address (tcp://host:8786) or 'local' for a LocalCluster here")
