# Ask CROW: `make run` starts the app on http://127.0.0.1:8000, `make test` runs every test.
# Both set themselves up on a fresh machine (virtualenv, packages, demo data) and are quick
# once set up.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Nothing downloads from a model hub; Ray sends no usage stats.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
# The dashboard's browser tests drive Debian's Chromium; Playwright never downloads one.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
CHROMIUM := /usr/bin/chromium

.PHONY: run test setup data lint format browser eval bench fuzz

run: data
	@$(PY) -m jobs.keys demo
	@echo "Ask CROW is starting (Ctrl-C stops it):"
	@echo "  dashboard      http://127.0.0.1:8000/"
	@echo "  API docs       http://127.0.0.1:8000/docs"
	@echo "  Ray dashboard  http://127.0.0.1:8265/"
	$(VENV)/bin/serve run serve_config.yaml

test: setup browser
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

# Chromium from Debian for tests/dashboard/test_dashboard_e2e.py (apt-get; as root or with sudo).
browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
	  else echo "Chromium is missing: apt-get install chromium" >&2; exit 1; fi; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

data: setup
	$(PY) -m jobs.seed_demo --if-missing

# Tool selection, answer correctness, grounding, fallbacks and latency on each evaluation file:
# Ask CROW (hints), Ask CROW with hints off and a pydantic-ai peer, interleaved question by
# question in one run (~40 min a file on 2 cores); var/eval/<file>.json. EVAL_FILES="..." picks files,
# EVAL_ARGS="" evaluates Ask CROW alone. truth_blind*.jsonl are blind sets: report them, don't tune on them.
EVAL_FILES ?= ../shared/evals/queries.jsonl benchmarks/truth_questions.jsonl benchmarks/truth_blind.jsonl benchmarks/truth_blind2.jsonl benchmarks/truth_blind3.jsonl benchmarks/truth_blind4.jsonl benchmarks/truth_blind5.jsonl benchmarks/truth_blind6.jsonl benchmarks/truth_blind7.jsonl benchmarks/truth_blind8.jsonl benchmarks/truth_blind9.jsonl benchmarks/truth_blind10.jsonl benchmarks/truth_blind11.jsonl benchmarks/truth_blind12.jsonl benchmarks/truth_blind13.jsonl benchmarks/truth_blind14.jsonl benchmarks/truth_blind15.jsonl benchmarks/truth_blind16.jsonl benchmarks/truth_blind17.jsonl benchmarks/truth_blind18.jsonl benchmarks/truth_blind19.jsonl benchmarks/truth_blind20.jsonl benchmarks/truth_blind21.jsonl benchmarks/truth_blind22.jsonl benchmarks/truth_blind23.jsonl benchmarks/truth_blind24.jsonl benchmarks/truth_blind25.jsonl benchmarks/truth_blind26.jsonl benchmarks/truth_blind27.jsonl benchmarks/truth_blind28.jsonl benchmarks/truth_blind29.jsonl benchmarks/truth_blind30.jsonl benchmarks/truth_blind31.jsonl benchmarks/truth_blind32.jsonl benchmarks/truth_blind33.jsonl benchmarks/truth_blind34.jsonl benchmarks/truth_blind35.jsonl benchmarks/truth_blind36.jsonl benchmarks/truth_blind37.jsonl benchmarks/truth_blind38.jsonl benchmarks/truth_blind39.jsonl benchmarks/truth_blind40.jsonl benchmarks/truth_blind41.jsonl benchmarks/truth_blind42.jsonl
EVAL_ARGS ?= --peer --baseline
eval: data
	@for f in $(EVAL_FILES); do \
	  $(PY) -m benchmarks.agent_compare --eval-file $$f --out var/eval/$$(basename $$f .jsonl).json $(EVAL_ARGS) || exit 1; \
	done

# Every benchmark of benchmarks/ (about an hour on 2 cores): var/bench/results.json, REPORT.md and
# PNG plots; e.g. BENCH_ARGS="--skip peer" or "--quick". Retrieval alone: python -m benchmarks.retrieval_bench
BENCH_ARGS ?=
bench: data
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

# schemathesis over every operation of the OpenAPI document, 100 generated requests each
# (make test runs a short version): var/fuzz/report.json, failures listed on the console.
fuzz: setup
	$(PY) -m tests.fuzzing --examples 100 --out var/fuzz/report.json

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
