#!/usr/bin/env bash
# An installed PSE, as most users meet it: build the wheel, install it in a fresh venv outside the
# checkout, and do what a user does: list, scaffold and run a task of their own, run both reference
# tasks, build a built-in task's knowledge index (into the user's cache, never site-packages), serve
# the dashboard, and run an evaluation. Any failure stops the script with the command that failed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
BASE="$(readlink -f "$("$PY" -c 'import sys; print(sys.base_prefix)')/bin/python3")"
WORK="$(mktemp -d /tmp/pse-wheel-XXXXXX)"
chmod 755 "$WORK"  # the sandbox's unprivileged user runs this venv's python
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }

step "build the wheel"
"$PY" -m pip wheel --quiet --no-deps -w "$WORK/dist" "$ROOT"
WHEEL="$(ls "$WORK"/dist/pse-*.whl)"
unzip -l "$WHEEL" | grep 'pse/_bundled/tasks/code-delivery/task.toml'

step "install it in a fresh venv"
"$BASE" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet "$WHEEL[eval]"
PSE="$WORK/venv/bin/pse"
SITE="$("$WORK/venv/bin/python" -c 'import pse, pathlib; print(pathlib.Path(pse.__file__).parent)')"
case "$SITE" in "$ROOT"*) echo "the installed pse imports from the checkout ($SITE)"; exit 1 ;; esac

mkdir -p "$WORK/user" && cd "$WORK/user"
export PSE_RUNS_DIR="$WORK/user/runs" XDG_CACHE_HOME="$WORK/user/cache"
unset PSE_TASKS_DIR PSE_STORE_URL
json_field() { "$WORK/venv/bin/python" -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }

step "pse --version, pse list"
"$PSE" --version
"$PSE" list | grep code-delivery >/dev/null

step "pse new + validate + run of a user task"
"$PSE" new mytask --tasks-dir "$WORK/user/mytasks" >/dev/null
"$PSE" validate mytask --tasks-dir "$WORK/user/mytasks"
test "$("$PSE" run mytask --tasks-dir "$WORK/user/mytasks" --json | json_field outcome)" = PASSED

step "both built-in tasks"
test "$("$PSE" run code-delivery --json | json_field outcome)" = PASSED
test "$("$PSE" run incident-review --json | json_field outcome)" = PASSED

step "a built-in task's knowledge index: in the user's cache, not in site-packages"
"$PSE" kb build incident-review --json >/dev/null
"$PSE" kb search incident-review "consumer lag" --json | grep citation >/dev/null
if find "$SITE" -name manifest.json -path "*knowledge*" | grep . >/dev/null; then
  echo "a knowledge index was written into site-packages"; exit 1
fi
find "$XDG_CACHE_HOME" -name manifest.json | grep . >/dev/null

step "pse serve"
PORT="$("$WORK/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$PSE" serve --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$PORT/api/runs" >/dev/null 2>&1 && break
  sleep 0.2
done
test "$(curl -fsS "http://127.0.0.1:$PORT/api/runs" | json_field total)" -ge 3
curl -fsS "http://127.0.0.1:$PORT/" | grep -i "<html" >/dev/null
kill "$SERVER"; SERVER=""

step "pse eval on a user suite (scripted arm, a hidden check)"
mkdir -p suite/hidden cassettes/pse
printf 'task = "mytask"\ndescription = "wheel check"\n' >suite/suite.toml
printf '{"id": "one", "inputs": {}, "hidden_check": ["python", "{hidden}/check.py"]}\n' >suite/instances.jsonl
printf 'print("ok")\n' >suite/hidden/check.py
cp "$WORK/user/mytasks/mytask/cassette.json" cassettes/pse/one.json
"$PSE" eval suite --arms pse --cassettes cassettes --out "$WORK/user/evals/one" \
  --tasks-dir "$WORK/user/mytasks" --json >"$WORK/eval.json"
test "$(json_field instances <"$WORK/eval.json")" = 1
test -s "$WORK/user/evals/one/report.html"

printf '\nwheel check: ok (%s)\n' "$(basename "$WHEEL")"
