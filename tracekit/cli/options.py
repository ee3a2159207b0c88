"""Options several commands share (explain, check, diff)."""

import typer

StepMarker = typer.Option(None, "--step-marker", help="Regex naming the event that marks one step "
                          "(default: ProfilerStep#N, else the whole trace is one step).")
DeviceOpt = typer.Option(None, "--device", help="Device spec id to use (e.g. h200), overriding the trace's.")
SpecOpt = typer.Option(None, "--spec", help="A device spec: a TOML file (e.g. your measured ceilings) or a "
                       "spec id (e.g. h200-measured).")
