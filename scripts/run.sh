#!/usr/bin/env bash
# `make run`: build the local default image when it is missing, then serve with a demo.
# FORKHORSE_HOME and FORKHORSE_PORT choose the state directory and the port.
set -euo pipefail
cd "$(dirname "$0")/.."
HOME_DIR="${FORKHORSE_HOME:-.forkhorse-local}"
PORT="${FORKHORSE_PORT:-8787}"
FORKHORSE=".venv/bin/forkhorse"
mkdir -p "$HOME_DIR"
HOME_DIR="$(cd "$HOME_DIR" && pwd)"  # tools below need an absolute path
echo "Forkhorse: state in $HOME_DIR, port $PORT"
echo "Checking the local 'default' check image (built once from Debian packages)..."
"$FORKHORSE" image --home "$HOME_DIR" build default --if-missing
echo "Starting forkhorse serve on 127.0.0.1:$PORT with the demo project."
exec "$FORKHORSE" serve --home "$HOME_DIR" --port "$PORT" --demo
