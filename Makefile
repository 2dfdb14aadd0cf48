# One command runs the portal, one runs the tests; each installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test unit unit-pg integration browser lint install install-dev bench clean

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

## test: lint, the unit tests on SQLite with Celery eager (the fast local loop), then the whole
## suite on PostgreSQL: the unit tests that reach the database again, then the integration tests (a
## real Celery worker on Redis) beside the browser tests (headless Chromium). Where PostgreSQL,
## Redis or Chromium is missing those tests skip, saying why; with PORTAL_REQUIRE_POSTGRES /
## _INTEGRATION / _BROWSER=1 (CI) they fail.
test: install-dev lint unit unit-pg
	$(MAKE) --no-print-directory -j2 --output-sync=target integration browser

# The integration tests wait on their worker about half the time, so they run beside the browser
# tests, each on a test database of its own; each pass prints its report when it ends.

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile
	$(BIN)/python manage.py makemigrations --check --dry-run -v 0

# The unit passes run on every core (pytest-xdist; each worker gets its own test database);
# TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= auto

unit: install-dev
	$(BIN)/pytest -m "not integration and not browser" -n $(TEST_WORKERS)

# PostgreSQL and Redis on 127.0.0.1 (override with TEST_POSTGRES_URL / TEST_REDIS_URL); pytest-django
# creates and drops the test database test_<name> next to the named one.
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/gpu_portal
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

# On PostgreSQL only the tests that reach the database run again: the rest (placement, manifests,
# settings) answer the same on either database, and the SQLite pass ran them.
unit-pg: install-dev
	DATABASE_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest -m "not integration and not browser" --database-tests-only -n $(TEST_WORKERS)

integration: install-dev
	DATABASE_URL=$(TEST_POSTGRES_URL) CELERY_BROKER_URL=$(TEST_REDIS_URL) $(BIN)/pytest -m integration

# The browser tests on two workers (a Chromium each) and on a database of their own (by default
# TEST_POSTGRES_URL's with `_browser` added; set BROWSER_POSTGRES_URL where that URL has a query
# string), so that they can run beside the integration tests.
BROWSER_WORKERS ?= 2
BROWSER_POSTGRES_URL ?= $(TEST_POSTGRES_URL)_browser

browser: install-dev
	DATABASE_URL=$(BROWSER_POSTGRES_URL) $(BIN)/pytest -m browser -n $(BROWSER_WORKERS)

bench: install-dev
	$(BIN)/python bench/placement.py

clean:
	rm -rf $(VENV) var staticfiles
