"""Fuzzing tracekit with mutations of committed real traces: engine.py (cases and checks), run.py (the
long run, not in CI); tests/test_fuzz.py runs a few hundred cases with a fixed seed."""
