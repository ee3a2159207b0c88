# tracekit: `make demo` explains a bundled real H200 capture; `make test` runs the test suite.
PY ?= python3
PIP = $(PY) -m pip install -q --disable-pip-version-check
DEMO_TRACE ?= captures/h200/block_eager.json.gz

.PHONY: setup setup-test demo test check-captures bench

setup:
	$(PIP) -e .

# torch (CPU) for capture tests, mlx[cpu] for MLX tests, HTA for the benchmark comparison
setup-test:
	$(PIP) -e ".[test,capture,mlx,hta]"

demo: setup
	tracekit explain $(DEMO_TRACE)

test: setup-test
	$(PY) -m pytest -q

check-captures: setup
	bash rules/check_captures.sh

bench: setup-test
	$(PY) bench/bench_explain.py
