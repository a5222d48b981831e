.PHONY: compile debug test bench lint clean

compile:
	python -m pip install -q -e ".[test]"

debug:
	ACP_FAST_DEBUG=1 python setup.py build_ext --inplace --force

test:
	python -m pytest -q

bench:
	python -m pytest benchmarks --benchmark-only -q

lint:
	lint-imports
	ruff check acp_fast tests benchmarks fuzz
	mypy --strict acp_fast

clean:
	rm -rf build *.egg-info acp_fast/wire/_framing.c acp_fast/wire/*.so acp_fast/wire/*.html
