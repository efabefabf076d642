# Set-up and everyday commands. Everything the project needs is installed by `make install`
# (called by `make run` and `make test`), into .venv, from the package registries.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test lint bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[engine,client,dashboard,test]'
	# The browser tests drive Debian's chromium through chromedriver; skipped when already installed.
	command -v chromedriver >/dev/null || (apt-get update && apt-get install -y chromium chromium-driver)
	# A real compose parser for tests/deploy (docker-compose.yml is checked with no Docker daemon): Debian's
	# docker-compose 1.29, without the recommended docker.io engine.
	command -v docker-compose >/dev/null || (apt-get update && apt-get install -y --no-install-recommends docker-compose)
	touch $(STAMP)

install: $(STAMP)

# The main job: migrate, then the launcher (collectors/management/commands/run.py) creates the admin
# login, registers the bundled engine and runs engine, Celery worker, beat and web on 127.0.0.1 until
# Ctrl-C. Embedded SQLite + filesystem broker unless DATABASE_URL / CELERY_BROKER_URL say otherwise.
run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py run

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m engine bench --prompts 8 --max-tokens 200 --json bench-results.json
