# Ariane developer entry points. Only Python 3.11+, Java 17 and make are assumed.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit run clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -n 2 --dist loadgroup

unit: $(STAMP)
	$(BIN)/pytest tests/unit

run: $(STAMP)
	$(BIN)/ariane standalone

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
