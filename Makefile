# Forkhorse: `make run` starts the local service with a demo project; `make test` runs the suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON313 ?= $(shell scripts/find-python313.sh)
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .tools
LOCK := requirements-lock.txt
TOOLS_LOCK := tools-requirements-lock.txt
# checkov pins boto3 to another version than the SAM CLI does: it gets a venv of its own.
CHECKOV := .checkov
CHECKOV_LOCK := checkov-requirements-lock.txt
FORKHORSE_HOME ?= .forkhorse-local
FORKHORSE_PORT ?= 8787
SOAK_SECONDS ?= 600
SOAK_AGENTS ?= 3
SOAK_HOSTILE ?= 1
SOAK_KILL_EVERY ?= 180
SOAK_REPORT ?= soak-report.json
SYSTEM_PACKAGES := podman runc bubblewrap nodejs debootstrap mmdebstrap arch-test gpg busybox-static uidmap chromium git stress-ng

.PHONY: help setup system-deps run test test-fast test-faults test-unit test-integration test-e2e test-hostile check lint lock openapi bench clean soak test-soak

help:
	@echo "make run    - set up and start Forkhorse on 127.0.0.1:$(FORKHORSE_PORT) with a demo project"
	@echo "make test   - set up and run the whole test suite (unit, integration and e2e)"
	@echo "make test-fast - the tests that need no podman, bubblewrap or browser (the inner loop)"
	@echo "make test-faults - the whole crash-point campaign (make test runs one point per step and write)"
	@echo "make test-unit | test-integration | test-e2e - one layer of it"
	@echo "make test-hostile - the hostile-agent suite alone (make test runs it too)"
	@echo "make check  - lint, type-check, openapi.json current, sam validate --lint, cfn-lint and sam build (never deploys)"
	@echo "make lock   - re-resolve the hashed lock files make setup installs from (UPGRADE=1: newest pins)"
	@echo "make openapi - regenerate the committed openapi.json (lists breaking changes first)"
	@echo "make bench  - benchmarks (ratios against bare baselines measured in the same run)"
	@echo "make soak   - $(SOAK_SECONDS) s of mixed traffic with kill -9 restarts; fails on 5xx or leaks"
	@echo "make test-soak - a 75 s soak with one kill, as a test"

# Every dependency, transitive ones too, comes from the hashed lock (`make lock` writes it);
# the package itself comes from the tree. pip check fails on a pyproject.toml the lock lags.
$(VENV)/.installed: $(LOCK) pyproject.toml layers/node/requirements.txt
	@test -n "$(PYTHON313)" || { echo "Python 3.13 is missing: install it (pyenv install 3.13) and retry." >&2; exit 1; }
	test -x $(PY) || $(PYTHON313) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --require-hashes -r $(LOCK)
	$(PY) -m pip install -q --no-deps -e .
	# The pinned Node 24 (quick checks and the local default image run it; issue 30).
	$(PY) -m pip install -q --no-deps --require-hashes -r layers/node/requirements.txt
	$(PY) -m pip check
	touch $@

$(TOOLS)/.installed: $(TOOLS_LOCK)
	test -x $(TOOLS)/bin/python || $(PYTHON313) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q --upgrade pip
	$(TOOLS)/bin/python -m pip install -q --require-hashes -r $(TOOLS_LOCK)
	touch $@

$(CHECKOV)/.installed: $(CHECKOV_LOCK)
	test -x $(CHECKOV)/bin/python || $(PYTHON313) -m venv $(CHECKOV)
	$(CHECKOV)/bin/python -m pip install -q --upgrade pip
	$(CHECKOV)/bin/python -m pip install -q --require-hashes -r $(CHECKOV_LOCK)
	touch $@

# Re-resolve the locks for Python 3.13 on Linux x86_64, from PyPI, keeping each pin that still
# fits (UPGRADE=1: the newest that fits); then `make setup` installs them.
LOCK_COMPILE = $(TOOLS)/bin/uv pip compile --quiet --generate-hashes --python-version 3.13 \
	--python-platform linux --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)
lock: $(TOOLS)/.installed
	$(LOCK_COMPILE) pyproject.toml --extra dev --extra client --extra server -o $(LOCK)
	$(LOCK_COMPILE) tools-requirements.txt -o $(TOOLS_LOCK)
	$(LOCK_COMPILE) checkov-requirements.txt -o $(CHECKOV_LOCK)

system-deps:
	@scripts/system-deps.sh $(SYSTEM_PACKAGES)

setup: system-deps $(VENV)/.installed

run: setup
	FORKHORSE_HOME=$(FORKHORSE_HOME) FORKHORSE_PORT=$(FORKHORSE_PORT) scripts/run.sh

# The three layers partition the suite (bench and soak run by their own targets); make test
# runs them in one pytest session. Tests run on TEST_WORKERS pytest-xdist workers: most of
# them wait on subprocesses (podman, bubblewrap, git), so more workers than cores pays
# (tests/support/parallel.py says how the suite is spread). TEST_WORKERS=0 runs serially.
# Tests marked `serial` (tests/conftest.py: they race a resource limit, which contention
# distorts) run afterwards in a session of their own, with no other worker loading the host.
# Crash points marked `campaign` repeat a step and write another point covers: make test
# leaves them to make test-faults (docs/testing.md). Every target ends with its own time.
UNIT_TESTS := tests/unit
INTEGRATION_TESTS := tests/integration tests/hostile
E2E_TESTS := tests/e2e
TEST_MARKERS := not bench and not soak and not campaign
FAST_MARKERS := $(TEST_MARKERS) and not podman and not sandbox and not browser
FAULTS_MARKERS ?= not bench
TEST_WORKERS ?= 4
FAST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS)
TIMED = TIMEFORMAT="make $@: %0R s wall, %0U s user + %0S s sys CPU"; time
# Run the parallel part, then the serial part, of the same selection ($(1): paths, $(2): markers).
parallel_then_serial = { $(PYTEST) $(1) -m "$(2) and not serial" && \
	$(PY) -m pytest $(1) -m "$(2) and serial"; }
# The unit layer alone is CPU-bound: on 2 cores workers cost more than they save (67 s in one
# process against 93 s on 2 or 4 workers, measured).
UNIT_WORKERS ?= 0

test: setup
	@$(TIMED) $(call parallel_then_serial,$(UNIT_TESTS) $(INTEGRATION_TESTS) $(E2E_TESTS),$(TEST_MARKERS))

test-fast: setup
	@$(TIMED) $(PY) -m pytest -n $(FAST_WORKERS) $(UNIT_TESTS) $(INTEGRATION_TESTS) $(E2E_TESTS) \
		-m "$(FAST_MARKERS)"

test-faults: setup
	@$(TIMED) $(PYTEST) tests/integration/faults -m "$(FAULTS_MARKERS)"

test-unit: setup
	@$(TIMED) $(PY) -m pytest -n $(UNIT_WORKERS) $(UNIT_TESTS) -m "$(TEST_MARKERS)"

test-integration: setup
	@$(TIMED) $(call parallel_then_serial,$(INTEGRATION_TESTS),$(TEST_MARKERS))

test-e2e: setup
	@$(TIMED) $(PYTEST) $(E2E_TESTS) -m "$(TEST_MARKERS)"

test-hostile: setup
	@$(TIMED) $(call parallel_then_serial,tests/hostile,not bench)

# Dead code ([tool.vulture], scripts/vulture_whitelist.py), then complexity held at today's
# level so only a regression fails: no block above C but upload.py's `_kept` (D), no
# module averaging above B, the whole averaging A.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=layers/forkhorse $(VENV)/bin/lint-imports
	$(VENV)/bin/vulture
	$(VENV)/bin/xenon --max-absolute D --max-modules B --max-average A layers/forkhorse/forkhorse functions
	$(VENV)/bin/xenon --max-absolute C --exclude '*/upload.py' layers/forkhorse/forkhorse functions

check: lint $(TOOLS)/.installed $(CHECKOV)/.installed
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(CHECKOV)/bin:$$PATH" FORKHORSE_PYTHON="$(CURDIR)/$(PY)" scripts/check.sh

openapi: $(VENV)/.installed
	PYTHONPATH=layers/forkhorse $(PY) -m scripts.openapi write

bench: setup
	$(PY) -m pytest tests/bench -m bench --benchmark-enable -p no:randomly -s

# The soak reuses the default image `make run` builds (in FORKHORSE_HOME), with a fresh home.
soak: setup
	$(VENV)/bin/forkhorse image --home $(FORKHORSE_HOME) build default --if-missing
	$(PY) -m scripts.soak --seconds $(SOAK_SECONDS) --agents $(SOAK_AGENTS) \
		--hostile $(SOAK_HOSTILE) --kill-every $(SOAK_KILL_EVERY) \
		--image-home $(FORKHORSE_HOME) --report $(SOAK_REPORT)

test-soak: setup
	@$(TIMED) $(PY) -m pytest tests/soak -m soak -p no:randomly

clean:
	rm -rf .aws-sam build dist *.egg-info

# SAM local, offline: the real Lambda packaging in Lambda-like containers (scripts/sam-local/).
.PHONY: sam-local
sam-local: $(VENV)/.installed $(TOOLS)/.installed
	@$(TIMED) $(PY) scripts/sam-local/run.py
