.PHONY: compile debug test bench bench-baseline lint clean

compile:
	python -m pip install -q -e ".[test]"

debug:
	ACP_FAST_DEBUG=1 python setup.py build_ext --inplace --force

test:
	python -m pytest -q

# Micro benchmarks (pytest-benchmark), compared with the saved baseline; speed is shown, never asserted.
BENCH_FILES := $(wildcard benchmarks/bench_*.py)
BENCH_BASELINE := benchmarks/baseline.json
BENCH_SHOW := --benchmark-group-by=group --benchmark-sort=name --benchmark-columns=median,iqr,rounds
# A baseline saved on another machine makes pytest-benchmark warn, and the test settings turn
# every warning into an error: comparing across machines is the point of this target.
BENCH_WARN := -W "ignore::pytest_benchmark.logger.PytestBenchmarkWarning"
BENCH_LIMIT :=

bench:
	python -m pytest $(BENCH_FILES) --benchmark-only -q -p no:randomly $(BENCH_SHOW) $(BENCH_WARN) $(BENCH_LIMIT) --benchmark-compare=$(BENCH_BASELINE)

bench-baseline:
	python -m pytest $(BENCH_FILES) --benchmark-only -q $(BENCH_SHOW) --benchmark-json=$(BENCH_BASELINE)
	python -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); [b['stats'].pop('data', None) for b in d['benchmarks']]; json.dump(d, open(p, 'w'), indent=1)" $(BENCH_BASELINE)

lint:
	@command -v ruff >/dev/null && command -v lint-imports >/dev/null || \
	  { echo "make lint needs the lint extra: pip install -e '.[test,lint]'"; exit 2; }
	lint-imports
	ruff check acp_fast tests benchmarks fuzz
	mypy --strict acp_fast

clean:
	rm -rf build *.egg-info acp_fast/wire/_framing.c acp_fast/wire/_decode.c acp_fast/wire/*.so acp_fast/wire/*.html \
	  acp_fast/observability/_timing.c acp_fast/observability/*.so acp_fast/observability/*.html
