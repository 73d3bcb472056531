# Two commands for a fresh machine (Python >= 3.10 with venv, and make):
#   make demo   set up .venv, install retrybudget with every extra, run the demo
#   make test   set up .venv (if needed), then lint, type-check and run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench mutation clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/retrybudget demo $(ARGS)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

# Mutation testing of the core (see CONTRIBUTING.md; the score is in docs/mutation.md)
mutation: $(STAMP)
	HYPOTHESIS_PROFILE=quick RB_PROPERTY_EXAMPLES=30 $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants
