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

# The main job. Until the server and dashboard land, it runs the bundled engine's benchmark on CPU.
run: $(STAMP)
	$(BIN)/python -m engine bench --device cpu --prompts 4 --max-tokens 128 --budgets 16,32,64

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m engine bench --json bench-results.json
