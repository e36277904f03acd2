# The two commands of the README:
#   make book   install what the book needs (once) and build the HTML into _build/html
#   make test   every test and check; exits non-zero on any failure (.ci/run calls it)
# Everything installs into the project: a virtual environment in .venv and the browser
# assets in node_modules. Stamps make a second run skip what is already done.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

BOOK_SOURCES := _config.yml _toc.yml $(wildcard book/_ext/*.py) $(wildcard book/*.md book/*.bib book/*.yml book/_static/*.js book/_static/*.css book/_templates/*.html) \
                $(wildcard notebooks/*.ipynb) scripts/book.py scripts/grade.py

.PHONY: book student pages pdf pdf-check screenshots grade test lint unit checks nbval html browser colab workflows linkcheck execute edition clean

book: $(BIN)/.book-installed node_modules/.installed _build/html/.built
	@echo
	@echo "The book is built. Open $(CURDIR)/_build/html/index.html"
	@echo "or serve it: $(PY) -m http.server --directory _build/html 8000"

$(BIN)/.book-installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -e .
	touch $@

$(BIN)/.test-installed: $(BIN)/.book-installed requirements-test.txt requirements-lint.txt
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $@

# What printing the book to PDF needs beside the book's stack (playwright, pypdf, pypdfium2).
$(BIN)/.pdf-installed: $(BIN)/.book-installed requirements-pdf.txt
	$(PY) -m pip install --quiet -r requirements-pdf.txt
	touch $@

# What ruff, codespell and zizmor need, and nothing else (no book, no PyTorch).
$(BIN)/.lint-installed: requirements-lint.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-lint.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

_build/html/.built: $(BOOK_SOURCES) $(BIN)/.book-installed node_modules/.installed
	$(PY) scripts/book.py
	touch $@

# The student edition: the same book with every solution removed.
student: $(BIN)/.book-installed node_modules/.installed
	$(PY) scripts/book.py --student
	@echo "Student edition: $(CURDIR)/_build/student/_build/html/index.html"

# The site as GitHub Pages publishes it (.github/workflows/pages.yml): the book in
# _build/pages, the student edition in _build/pages/student/.
pages: book student
	$(PY) scripts/book.py --pages _build/pages

# The book as PDF, both editions, printed from their HTML by Chromium (scripts/pdf.py;
# Debian's chromium and fonts-lmodern are installed when missing):
# _build/pdf/attention-book.pdf (each solution after its exercise) and
# _build/pdf/attention-book-student.pdf (no solution). Each is also put beside its edition
# in the site, where every page's download button links it.
pdf: book student $(BIN)/.pdf-installed
	$(PY) scripts/pdf.py

# Screenshots of every page of both editions, whole, in light mode and on a phone, and
# the first screen dark, in _build/screenshots/full/ (make test keeps first screens only).
screenshots: pages $(BIN)/.test-installed
	$(PY) scripts/screenshots.py

# Re-execute notebooks and store their outputs (all, or NB=notebooks/01_softmax.ipynb),
# then regenerate the Colab and student editions (editions/colab/, editions/student/).
execute: $(BIN)/.book-installed
	$(PY) scripts/execute_notebooks.py $(NB)
	$(PY) scripts/colab_edition.py

# The Colab and student editions alone: editions/{colab,student}/NN_topic.ipynb from every
# chapter (a few seconds).
edition: $(BIN)/.book-installed
	$(PY) scripts/colab_edition.py

# Grade a folder of submitted notebooks (see book/instructors.md; it runs the students' code):
#   make grade DIR=submissions [OUT=results.csv] [JOBS=1] [CELL_TIMEOUT=120] [TOTAL_TIMEOUT=900] [MEMORY_MB=4096]
# It seals each submission off (root, bubblewrap: apt-get install bubblewrap) and refuses otherwise.
grade: $(BIN)/.book-installed
	@test -n "$(DIR)" || { echo "usage: make grade DIR=folder-of-notebooks [OUT=results.csv] [JOBS=1] [CELL_TIMEOUT=s] [TOTAL_TIMEOUT=s] [MEMORY_MB=MB]"; exit 2; }
	$(PY) scripts/grade.py "$(DIR)" --out "$(or $(OUT),results.csv)" --jobs $(or $(JOBS),1) \
	    $(if $(CELL_TIMEOUT),--cell-timeout $(CELL_TIMEOUT)) $(if $(TOTAL_TIMEOUT),--total-timeout $(TOTAL_TIMEOUT)) \
	    $(if $(MEMORY_MB),--memory-mb $(MEMORY_MB))

# Every test and check (the one command that runs everything), then the targets sized to a
# change: each is one step of `make test` (or, for checks, part of its unit step).
#   make lint        ruff check, ruff format --check, codespell (light install: no PyTorch)
#   make workflows   actionlint and zizmor on .github/workflows
#   make unit        helpers' doctests and tests/ (not the site or Colab tests), both cores
#   make checks      the self-checks, book/exercises.yml and the editions' staleness tests
#   make nbval       strict nbval on every chapter, or on one: make nbval NB=notebooks/01_softmax.ipynb
#   make html        both editions built, and the site as published (_build/pages)
#   make browser     the built site in headless Chromium (run make html first)
#   make pdf-check   both editions printed to PDF and checked against the site (after make html)
#   make colab       every chapter's Colab and student notebooks on Colab's versions
test: $(BIN)/.test-installed $(BIN)/.pdf-installed node_modules/.installed
	$(PY) scripts/run_tests.py

lint: $(BIN)/.lint-installed
	$(PY) scripts/run_tests.py lint

workflows: $(BIN)/.lint-installed node_modules/.installed
	$(PY) scripts/run_tests.py workflows

unit checks colab: $(BIN)/.test-installed
	$(PY) scripts/run_tests.py $@

nbval: $(BIN)/.test-installed
	$(PY) scripts/run_tests.py nbval $(NB)

html browser: $(BIN)/.test-installed node_modules/.installed
	$(PY) scripts/run_tests.py $@

pdf-check: $(BIN)/.test-installed $(BIN)/.pdf-installed
	$(PY) scripts/run_tests.py pdf

linkcheck: $(BIN)/.book-installed
	$(BIN)/jupyter-book build . --builder linkcheck

clean:
	rm -rf _build
