# Plait: `make demo` runs the demo export on real data, `make test` the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test bench dev clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m ops.cli demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) bench/bench_writers.py
	$(PY) bench/bench_export.py
	$(PY) bench/bench_wide.py
	$(PY) bench/bench_alert_funnel.py
	$(PY) bench/bench_alert_runner.py
	$(PY) bench/bench_alert_e2e.py
	$(PY) bench/bench_alert_vs_alertmanager.py

dev: $(STAMP)
	$(PY) -m ops.cli dev

clean:
	rm -rf $(VENV) .plait
