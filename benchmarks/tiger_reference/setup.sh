#!/usr/bin/env bash
# A throw-away virtual environment with cornac 3.0.1 (the reference TIGER) next to crabrec's own.
# cornac is not a dependency of crabrec: it lives only in this environment and its code stays out of the repository.
#   bash benchmarks/tiger_reference/setup.sh [VENV]     (default: .venv-cornac)
set -euo pipefail
venv="${1:-.venv-cornac}"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q torch==2.13.0          # the local CPU wheel; pinned first so cornac does not pull CUDA
"$venv/bin/pip" install -q cornac==3.0.1 "transformers>=4.30" numpy
"$venv/bin/python" -c "import cornac, torch, transformers; print('cornac', cornac.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
