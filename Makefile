# Set-up and everyday commands. Everything the project needs is installed by `make install`
# (called by `make run` and `make test`), into .venv, from the package registries.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test lint bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[engine,test]'
	touch $(STAMP)

install: $(STAMP)

# The main job. Today: the bundled DDTree engine serving the small models on 127.0.0.1:30000
# (GPU when present). The collectors and the dashboard join it as they land.
run: $(STAMP)
	$(BIN)/python -m engine serve

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m engine bench --prompts 8 --max-tokens 200 --json bench-results.json
