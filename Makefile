.PHONY: compile debug test bench bench-baseline lint clean help venv

# A bare `make` is `make compile`; the targets that install refuse to run outside a virtual
# environment, so that they never install into whatever `python` comes first on PATH.
compile: venv ## editable install with the test extra; builds the Cython extensions in place
	python -m pip install -q -e ".[test]"

# Built through pip, so the build gets the setuptools and Cython that pyproject.toml requires
# (a venv's own setuptools may be too old for its license field, and Cython may be absent).
debug: venv ## rebuild the extensions in place with line tracing, annotation, -O0 -g (ACP_FAST_SANITIZE=1: ASan/UBSan)
	ACP_FAST_DEBUG=1 python -m pip install -q --no-deps --force-reinstall -e .

venv:
	@python -c "import sys; sys.exit(sys.prefix == sys.base_prefix)" 2>/dev/null || \
	  { echo "make: activate a virtual environment first (python3 -m venv .venv && . .venv/bin/activate);" \
	    "this target installs into the python first on PATH"; exit 2; }

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## the test suite (random order; -p no:randomly keeps file order)
	python -m pytest -q

# Micro benchmarks (pytest-benchmark), compared with the saved baseline; speed is shown, never asserted.
BENCH_FILES := $(wildcard benchmarks/bench_*.py)
BENCH_BASELINE := benchmarks/baseline.json
BENCH_SHOW := --benchmark-group-by=group --benchmark-sort=name --benchmark-columns=median,iqr,rounds
# A baseline saved on another machine makes pytest-benchmark warn, and the test settings turn
# every warning into an error: comparing across machines is the point of this target.
BENCH_WARN := -W "ignore::pytest_benchmark.logger.PytestBenchmarkWarning"
BENCH_LIMIT :=

bench: ## micro benchmarks compared with benchmarks/baseline.json
	python -m pytest $(BENCH_FILES) --benchmark-only -q -p no:randomly $(BENCH_SHOW) $(BENCH_WARN) $(BENCH_LIMIT) --benchmark-compare=$(BENCH_BASELINE)

bench-baseline: ## save the micro benchmarks as the new baseline
	python -m pytest $(BENCH_FILES) --benchmark-only -q $(BENCH_SHOW) --benchmark-json=$(BENCH_BASELINE)
	python -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); [b['stats'].pop('data', None) for b in d['benchmarks']]; json.dump(d, open(p, 'w'), indent=1)" $(BENCH_BASELINE)

lint: ## lint-imports, ruff, mypy --strict (needs the lint extra)
	@command -v ruff >/dev/null && command -v lint-imports >/dev/null || \
	  { echo "make lint needs the lint extra: pip install -e '.[test,lint]'"; exit 2; }
	lint-imports
	ruff check acp_fast tests benchmarks fuzz
	mypy --strict acp_fast

clean: ## remove build output and the generated C and shared objects
	rm -rf build *.egg-info acp_fast/wire/_framing.c acp_fast/wire/_decode.c acp_fast/wire/*.so acp_fast/wire/*.html \
	  acp_fast/observability/_timing.c acp_fast/observability/*.so acp_fast/observability/*.html
