# tracekit: `make demo` explains a bundled real H200 capture; `make test` runs the test suite.
PY ?= python3
PIP = $(PY) -m pip install -q --disable-pip-version-check
DEMO_TRACE ?= captures/h200/block_eager.json.gz
# the torch the tests capture with: a CPU build (an unpinned `pip install torch` on Linux is the CUDA build, GBs)
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup setup-torch-cpu setup-test demo test check-captures bench

setup:
	$(PIP) -e .

# A torch that is already installed is kept. Else, on Linux: the +cpu build from the configured indexes
# (a local wheel, a mirror), then from PyTorch's CPU index; elsewhere PyPI's torch is already CPU-only.
setup-torch-cpu:
	@if $(PY) -c "import torch" 2>/dev/null; then \
	  echo "torch $$($(PY) -c 'import torch; print(torch.__version__)') already installed: kept"; \
	elif [ "$$(uname -s)" != Linux ]; then \
	  $(PIP) "torch==$(TORCH_VERSION)"; \
	elif $(PIP) "torch==$(TORCH_VERSION)+cpu" 2>/dev/null; then \
	  echo "installed torch $(TORCH_VERSION)+cpu"; \
	elif $(PIP) "torch==$(TORCH_VERSION)+cpu" --extra-index-url $(TORCH_CPU_INDEX); then \
	  echo "installed torch $(TORCH_VERSION)+cpu from $(TORCH_CPU_INDEX)"; \
	else \
	  echo "no CPU build of torch $(TORCH_VERSION) found: installing the default build" >&2; \
	  $(PIP) "torch==$(TORCH_VERSION)"; \
	fi

# torch (CPU) for capture tests, mlx[cpu] (and pydot) for MLX tests, HTA for `tracekit ranks --hta` and the
# benchmark, Dask distributed for the multi-rank --dask path
setup-test: setup-torch-cpu
	$(PIP) -e ".[test,capture,mlx,hta,dask,xlsx]"

# the demo's last line: what the trace means, from the explain JSON (median step)
define DEMO_SUMMARY
import json, statistics, sys
doc = json.load(sys.stdin)
s, spec = doc["summary"], doc["device"]["spec"]
med = lambda xs: statistics.median(x for x in xs if x is not None)
kernels, t, floor = med(s["kernels_per_step"]), med(s["kernel_us_per_step"]), med(s["floor_us_per_step"])
print(f"In short: a median step ran {kernels:.0f} kernels for {t:.1f} µs of GPU kernel time, {t / floor:.1f}× "
      f"its roofline floor of {floor:.1f} µs on the {spec} spec; {s['costed_time_pct']:.1f}% of that time is costed "
      f"and the GPU was busy {med(s['busy_pct_per_step']):.0f}% of the step (the rest: gaps between kernels).")
endef
export DEMO_SUMMARY

demo: setup
	$(PY) -m tracekit explain $(DEMO_TRACE)
	@$(PY) -m tracekit explain $(DEMO_TRACE) --format json 2>/dev/null | $(PY) -c "$$DEMO_SUMMARY"

test: setup-test
	$(PY) -m pytest -q -n auto

check-captures: setup
	bash rules/check_captures.sh

bench: setup-test
	$(PY) bench/bench_explain.py
	$(PY) bench/bench_ranks.py
