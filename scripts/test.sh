#!/usr/bin/env bash
# The README's test command: install what the tests need (scripts/setup-tests.sh), then run the
# whole suite, including ruff, the format check, mypy --strict and the real-client tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export TASKGATE_CLIENTS_VERSIONS="claude-code-2.1.332-codex-0.169.0"
: "${TASKGATE_CLIENTS_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/taskgate-clients/$TASKGATE_CLIENTS_VERSIONS}"
export TASKGATE_CLIENTS_DIR
bash scripts/setup-tests.sh
exec .venv/bin/python -m pytest "$@"
