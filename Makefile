# Two commands for a fresh machine (Python >= 3.10 with venv, and make):
#   make demo   set up .venv with what the command line needs (the cli extra), run the demo,
#               and print the commands to try next
#   make test   add the development tools to .venv (the dev extra), then lint, type-check and
#               run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CLI    := $(VENV)/.installed-cli
DEV    := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck pytest bench mutation clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(CLI): pyproject.toml | $(BIN)/python
	@echo "installing retrybudget with its command line (rich, httpx, starlette, uvicorn) into $(VENV)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[cli]"
	touch $(CLI)

$(DEV): pyproject.toml | $(BIN)/python
	@echo "installing retrybudget with the development tools (pytest, mypy, ruff, hypothesis, peer libraries) into $(VENV)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(DEV) $(CLI)

demo: $(CLI)
	$(BIN)/retrybudget demo $(ARGS)
	@echo ""
	@echo "Try next (each line runs as printed; or run '. $(BIN)/activate' once and drop the '$(BIN)/'):"
	@echo "  $(BIN)/retrybudget report out/demo-audit.jsonl     # what happened and why, in a short table"
	@echo "  $(BIN)/retrybudget report out/demo-audit.jsonl --html out/review.html   # a page with a timeline"
	@echo "  $(BIN)/retrybudget check                           # the acceptance checklist over loopback HTTP"
	@echo "  $(BIN)/retrybudget demo --style retry-after        # the same job behind plain Retry-After limits"
	@echo "  $(BIN)/retrybudget --help                          # every command, with examples"

test: lint typecheck pytest

lint: $(DEV)
	$(BIN)/ruff check src tests benchmarks tools

typecheck: $(DEV)
	$(BIN)/mypy

# Two workers, each test file whole on one (a file's property and the check that it reached
# its cases run together). WORKERS=0 runs the suite in this process, one test at a time.
WORKERS ?= 2

pytest: $(DEV)
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile $(ARGS)

bench: $(DEV)
	$(BIN)/python benchmarks/overhead.py

# Mutation testing of the core (see CONTRIBUTING.md; the score is in docs/mutation.md).
# MUTANTS narrows the run to one module's mutants: make mutation MUTANTS='retrybudget.core.flow*'
MUTANTS ?=
mutation: $(DEV)
	HYPOTHESIS_PROFILE=quick RB_PROPERTY_EXAMPLES=30 $(BIN)/mutmut run --max-children 2 $(if $(MUTANTS),'$(MUTANTS)')
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis mutants
