#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine (called by scripts/test.sh, which
# is the README's test command and what .ci/run runs):
#   - system packages: git, bubblewrap (agent confinement), socat, Node.js + npm (the real
#     clients), Debian's chromium + chromium-driver (the dashboard's browser test), tmux
#     (the Codex terminal UI test), postgresql (the PostgreSQL store's tests start a
#     throwaway cluster of their own; no service is started here);
#   - the real Claude Code and Codex CLIs, pinned, from the npm registry into a cache outside
#     the repository ($TASKGATE_CLIENTS_DIR);
#   - the virtualenv .venv with taskgate and its test extras.
# Idempotent: what is already there is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.169.0
: "${TASKGATE_CLIENTS_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/taskgate-clients/claude-code-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION}"

say() { printf 'setup-tests: %s\n' "$*" >&2; }

# -- system packages ----------------------------------------------------------------------------
packages=(git bubblewrap socat chromium chromium-driver tmux postgresql ripgrep)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
fi
if ((${#missing[@]})); then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      say "missing system packages: ${missing[*]}"
      say "install them (e.g. 'sudo apt-get install -y ${missing[*]}') and run this again"
      exit 1
    fi
  fi
  say "installing ${missing[*]} (apt)"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# -- the real clients ---------------------------------------------------------------------------
if [ ! -x "$TASKGATE_CLIENTS_DIR/node_modules/.bin/claude" ] \
  || [ ! -x "$TASKGATE_CLIENTS_DIR/node_modules/.bin/codex" ]; then
  say "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION"
  mkdir -p "$TASKGATE_CLIENTS_DIR"
  npm install --no-audit --no-fund --loglevel=error --prefix "$TASKGATE_CLIENTS_DIR" \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >/dev/null
fi
"$TASKGATE_CLIENTS_DIR/node_modules/.bin/claude" --version >/dev/null
"$TASKGATE_CLIENTS_DIR/node_modules/.bin/codex" --version >/dev/null 2>&1

# -- Python -------------------------------------------------------------------------------------
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
say "ready (clients in $TASKGATE_CLIENTS_DIR)"
