#!/usr/bin/env bash
# The lowest dependency versions pyproject.toml allows, tested: installs crabrec into a throw-away environment
# (.venv-floors) with each direct dependency at its floor (uv's lowest-direct resolution; torch stays the CPU wheel
# installed first), checks that each one really sits at its floor, and runs pytest there on the tests given (default:
# those that lean hardest on transformers, peft, accelerate, sentence-transformers, typer, tqdm, pydantic,
# fastapi, and pandas and pyarrow, which read users' tables). A floor that is too low fails here, not on a user's
# machine.
#   bash scripts/check_floors.sh                # the default tests
#   bash scripts/check_floors.sh tests          # the whole suite
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-floors}
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
    TESTS=(tests/test_backbone.py tests/test_backbone_methods.py tests/test_compiling.py tests/test_crab_finetune.py
           tests/test_docs.py tests/test_logs_and_report.py tests/test_tiger.py tests/test_tiger_crab.py
           tests/test_sasrec.py tests/test_serve.py tests/test_reliability_files.py tests/test_own_data.py
           tests/test_data_layer.py tests/test_repeats.py tests/test_embed_resume.py tests/test_new_items.py
           tests/test_unavailable.py tests/test_recommend.py tests/test_frames.py tests/test_python_run.py
           tests/test_compare.py tests/test_plots.py)
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q torch==2.13.0 uv
"$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --resolution lowest-direct -e ".[dev]"
"$VENV/bin/python" scripts/floors_installed.py
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
