#!/usr/bin/env bash
# Python 3.10's install resolves: `make setup` there installs under constraints-py310.txt, and a pin that only
# Python 3.11 has (as most of constraints.txt's newest releases are) would leave pip with no resolution. Resolves
# crabrec with every extra under that file in a throw-away venv, downloading nothing but package metadata. Skipped,
# with a line saying so, on a machine without Python 3.10 (PY310 names one; else python3.10, else pyenv's).
#   bash scripts/check_py310.sh
set -euo pipefail
cd "$(dirname "$0")/.."
is_310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; }
PY=""
for candidate in "${PY310:-}" python3.10 $(pyenv root 2>/dev/null)/versions/3.10*/bin/python3.10; do
    if [ -n "$candidate" ] && is_310 "$candidate"; then PY=$candidate; break; fi
done
if [ -z "$PY" ]; then
    echo "check_py310: no Python 3.10 here; skipped"
    exit 0
fi
VENV=$(mktemp -d)
trap 'rm -rf "$VENV"' EXIT
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q --dry-run -c constraints-py310.txt torch==2.13.0 gguf -e ".[dev,docs]"
echo "check_py310: crabrec resolves on $("$PY" --version) under constraints-py310.txt"
