# Two commands do everything on a fresh machine with Python 3.11:
#   make book   set up, build the book (English and Chinese): the HTML, and a PDF of each
#               edition that the pages link (Chromium, installed by `make` when missing)
#   make test   set up, run every test (unit tests, ruff, every notebook)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# Multi30k: ../shared/data on the project's own machines; elsewhere the
# package downloads it into a user cache folder on first use.
SHARED_DATA := $(abspath $(wildcard ../shared/data))
export MINITRANSFORMER_DATA ?= $(SHARED_DATA)

.PHONY: book html pdf system-packages test test-fast unit notebooks lint execute execute-stale stale benchmark clean setup

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# Pinned requirements first (CPU torch), then the package itself.
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# Both editions: English in _build/html/, Chinese (zh/, regenerated first) in _build/html/zh/,
# each with the PDF of the whole edition at its root (the header's download menu links it).
book: html pdf

html: setup
	$(BIN)/python tools/make_chinese_edition.py
	$(BIN)/python tools/build_book.py

# Chromium, a CJK font and poppler (apt-get, when missing and run as root).
system-packages:
	bash tools/install_system_packages.sh

# The whole book as one PDF per edition, printed by headless Chromium (tools/build_pdf.py):
# _build/pdf/minitransformer.pdf and _build/pdf/minitransformer-zh.pdf, also copied into
# the HTML site when it exists.
pdf: setup system-packages
	$(BIN)/python tools/make_chinese_edition.py
	$(BIN)/python tools/build_pdf.py

lint: setup
	$(BIN)/ruff check minitransformer tests benchmarks tools

unit: setup
	$(BIN)/python -m pytest tests

# Chapters that train for minutes honour MINITRANSFORMER_QUICK=1 (shorter runs).
notebooks: setup
	MINITRANSFORMER_QUICK=1 $(BIN)/python -m pytest --nbval-lax --nbval-cell-timeout=1800 notebooks

test: system-packages lint unit notebooks

# While working: ruff and the unit tests not marked slow (no notebooks, no browser).
test-fast: lint
	$(BIN)/python -m pytest tests -m "not slow"

# Re-run notebooks in place with the full settings and stamp them (refreshes
# stored outputs): every chapter, or NOTEBOOKS="notebooks/03_qkv_and_masks.ipynb ...".
# execute-stale re-runs only the stale ones; stale lists them (exit 1 if any).
NOTEBOOKS ?=
execute: setup
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

execute-stale: setup
	$(BIN)/python tools/execute_notebooks.py --stale $(NOTEBOOKS)

stale: setup
	$(BIN)/python tools/execute_notebooks.py --check $(NOTEBOOKS)

benchmark: setup
	$(BIN)/python benchmarks/bench_transformer.py

clean:
	rm -rf _build
