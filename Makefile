# laglab. `make up` brings the lab up; `make test` runs every test against it.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
ARGS ?=

PHONY_RUNS := run report clean-results
.PHONY: $(PHONY_RUNS) help up down clean test test-unit test-integration test-kernel lint format consistency lag docs ps logs bench-startup bench-shaping bench-memory bench-tcp-buffers venv

.DEFAULT_GOAL := help
help: ## every target with what it does (this list)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:[^#]*## /\t/' | expand -t 20

PROFILE ?=
up: ## start the lab (installs and builds what is missing); PROFILE=monitoring adds Prometheus + Grafana
	PROFILE=$(PROFILE) scripts/up $(ARGS)

down: ## stop the lab (data kept; the controller's state of shaping, faults and runs forgotten)
	scripts/down

clean: ## stop the lab, remove its volumes and built images
	scripts/down --clean

venv: $(VENV)/.installed
$(VENV)/.installed: controller/requirements.txt controller/requirements-dev.txt controller/pyproject.toml
	scripts/venv $(VENV)
	touch $@

test: venv ## kernel suite (User-mode Linux), then make up, then unit + integration tests against the lab
	PROFILE=$(PROFILE) scripts/test

test-kernel: ## both shaping backends on a netem kernel in User-mode Linux (no Docker needed)
	scripts/uml $(ARGS)

test-unit: venv
	cd controller && ../$(PY) -m pytest -q tests/unit

test-integration: venv up
	scripts/test integration

lint: venv
	cd controller && ../$(VENV)/bin/ruff check . $(addprefix ../scripts/,bench-startup bench-shaping bench-memory bench-tcp-buffers) && ../$(VENV)/bin/ruff format --check . $(addprefix ../scripts/,bench-startup bench-shaping bench-memory bench-tcp-buffers)

format: venv
	cd controller && ../$(VENV)/bin/ruff format . && ../$(VENV)/bin/ruff check --fix .

SCENARIO ?=
RUN ?=
run: venv ## run a scenario: make run SCENARIO=scenarios/<name>.yaml [QUICK=1] [PLAN=1]
	@test -n "$(SCENARIO)" || { echo "usage: make run SCENARIO=scenarios/<name>.yaml [QUICK=1] [PLAN=1]"; exit 2; }
	./laglab run $(SCENARIO) $(if $(QUICK),--quick) $(if $(PLAN),--plan)

report: venv ## rebuild plots and report.md of a run from its files: make report RUN=results/<run>
	@test -n "$(RUN)" || { echo "usage: make report RUN=results/<run>"; exit 2; }
	./laglab report $(RUN)

clean-results: ## remove the *-live folders of earlier controller starts (runs and benchmarks are kept)
	@ls -d results/*-live 2>/dev/null | sort | head -n -1 | xargs -r rm -rf

consistency: venv ## wait for the target to catch up, then compare every lab table (laglab consistency)
	@./laglab consistency

lag: venv ## latest lag sample (laglab lag)
	@./laglab lag

docs: venv ## write docs/ parts generated from the code (every laglab option, the scenario keys)
	@scripts/docs

ps:
	@source scripts/env.sh && compose ps

logs:
	@source scripts/env.sh && compose logs --tail 50 $(SERVICE)

bench-shaping: venv ## delay and rate fidelity, capacity under delay, control latency (lab running); ARGS=--uml: both backends in User-mode Linux
	$(PY) scripts/bench-shaping $(ARGS)

bench-memory: venv ## controller RSS over a long recording, growth per hour (ARGS="--minutes 30 --load")
	$(PY) scripts/bench-memory $(ARGS)

bench-tcp-buffers: venv ## iperf3 at 100 ms RTT with the lab's TCP buffers and with 64 MiB (lab running)
	$(PY) scripts/bench-tcp-buffers $(ARGS)

bench-startup: venv ## cold/warm make up -> first replicated row, controller CPU/memory (ARGS=--cold)
	$(PY) scripts/bench-startup $(ARGS)
