# One command runs the portal, one runs the tests; each installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test unit integration browser lint install install-dev bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip check
	touch $@ $(VENV)/.runtime

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

## run: the embedded portal (SQLite, in-process Celery worker and beat, simulated cluster, demo data)
run: install
	$(BIN)/python manage.py migrate --no-input -v 0
	PORTAL_BASE_URL=$${PORTAL_BASE_URL:-http://127.0.0.1:$(PORT)} $(BIN)/python manage.py seed_demo
	PORTAL_BASE_URL=$${PORTAL_BASE_URL:-http://127.0.0.1:$(PORT)} $(BIN)/python manage.py runportal 127.0.0.1:$(PORT)

## test: lint, unit tests (SQLite, Celery eager), integration tests (PostgreSQL + a real Celery
## worker on Redis) and browser tests (headless Chromium)
test: install-dev lint unit integration browser

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run -v 0

unit: install-dev
	$(BIN)/pytest -m "not integration and not browser"

# PostgreSQL and Redis on 127.0.0.1 (override with INTEGRATION_DATABASE_URL / INTEGRATION_BROKER_URL).
INTEGRATION_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gpu_portal
INTEGRATION_BROKER_URL ?= redis://127.0.0.1:6379/15
integration: install-dev
	DATABASE_URL=$(INTEGRATION_DATABASE_URL) CELERY_BROKER_URL=$(INTEGRATION_BROKER_URL) $(BIN)/pytest -m integration

browser: install-dev
	$(BIN)/pytest -m browser

bench: install-dev
	$(BIN)/python bench/placement.py

clean:
	rm -rf $(VENV) var staticfiles
