#!/usr/bin/env bash
# `scripts/beside-cpu-hogs.sh CMD...`: run CMD with CPU hogs beside it (one per core, at most
# HOG_SECONDS), so a test that passes only on a quiet machine fails here instead of in a
# user's run. The hogs are stopped however CMD ends.
set -euo pipefail
hogs="${HOGS:-$(nproc)}"
seconds="${HOG_SECONDS:-1800}"
command -v stress-ng >/dev/null || { echo "stress-ng is missing: make setup installs it" >&2; exit 1; }
stress-ng --cpu "$hogs" --timeout "$seconds" --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
echo "beside $hogs CPU hogs (stress-ng, PID $hog, at most $seconds s): $*"
"$@"
