PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test bench lint format clean

$(INSTALLED): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(PY) -m project.demo

test: $(INSTALLED)
	$(PY) -m pytest

# Benchmarks: writes bench/RESULTS.md and bench/results.png (about 10 minutes)
bench: $(INSTALLED)
	$(PY) -m bench

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(INSTALLED)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .demo build dist *.egg-info test-output
