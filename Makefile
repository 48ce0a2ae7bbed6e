# deqlab — the two commands of the quick start are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test bench lint format readme docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned to the CPU wheel that lies on this disk (elsewhere: the default
# build of the same release); then the package, which only asks for torch>=2.2.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/deqlab reproduce ling2023-fig1 --preset quick

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/run_all.py

lint: install
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks

format: install
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

# the README's table of experiments, from the registry (tests/test_docs.py checks it)
readme: install
	$(BIN)/python -m deqlab.experiments.catalog README.md

# docs/experiments.md's settings (from the declarations) and statements (every tiny preset, a
# few minutes); tests/test_docs.py and tests/test_cli_experiments.py check them
docs: install
	$(BIN)/python -m deqlab.experiments.catalog README.md docs/experiments.md

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
