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

bench:
	python -m pytest $(BENCH_FILES) --benchmark-only -q $(BENCH_SHOW) --benchmark-compare=$(BENCH_BASELINE)

bench-baseline:
	python -m pytest $(BENCH_FILES) --benchmark-only -q $(BENCH_SHOW) --benchmark-json=$(BENCH_BASELINE)
	python -c "import json, sys; p = sys.argv[1]; d = json.load(open(p)); [b['stats'].pop('data', None) for b in d['benchmarks']]; json.dump(d, open(p, 'w'), indent=1)" $(BENCH_BASELINE)

lint:
	lint-imports
	ruff check acp_fast tests benchmarks fuzz
	mypy --strict acp_fast

clean:
	rm -rf build *.egg-info acp_fast/wire/_framing.c acp_fast/wire/*.so acp_fast/wire/*.html
