"""Fixtures of the browser tests: the built sites served, and each page loaded once.

`loaded(edition, doc, scheme)` returns the `LoadedPage` of tests/site/pages.py, loading
the page the first time it is asked for (once, read in both themes) and keeping it for the
session, so the raw-TeX, console, image, alt-text, link, theme and axe-core checks of a
page share one load.

`make browser` spreads the tests over both cores (pytest-xdist, each worker its own
Chromium) by page (`--dist loadgroup`, with the scheduler below): every test of a page, in
either edition and theme, runs in the worker that loads that page, so each page of each
edition is loaded once, and the pages share the two cores evenly. A test of no
page runs with the other tests of its file (their module fixtures are built once).

The session checks that promise: every load is recorded, and a page loaded twice (by two
workers, or twice in one) fails the run (`pytest_sessionfinish`).
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import serve_directory
from tests.site.pages import HTML, KO, KO_STUDENT, PAGES, PUBLISHED, STUDENT, LoadedPage, load

HERE = Path(__file__).parent
# Where each process of the session (the one pytest started, or each of its pytest-xdist
# workers) writes the pages it loads: a directory that the first makes and they inherit.
LOADS = "ATTENTION_BOOK_PAGE_LOADS"


def group_of(nodeid: str) -> str:
    """The work unit of a browser test: `page:DOC` when one of its parameters is a page of
    the table of contents (DOC, alone or joined to the theme: "notebooks/01_softmax-dark"),
    else `file:NAME`, its file."""
    path, _, rest = nodeid.partition("::")
    params = re.search(r"\[(.*)\]$", rest)
    if params:
        found = [doc for doc in PAGES if re.search(rf"(^|-){re.escape(doc)}(-|$)", params.group(1))]
        if found:
            return f"page:{max(found, key=len)}"
    return f"file:{Path(path).name}"


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover (pytest-xdist is a test dependency)
    pass
else:

    class ByPage(LoadScopeScheduling):
        """Whole pages (and whole files of tests of no page) to one worker each, those
        with the most tests first. (pytest-xdist 3.8's own `loadgroup` marks a test's group by rewriting its
        `_nodeid`, which pytest 9 no longer reads: its groups were silently ignored and
        every page could be loaded by both workers.)"""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadgroup":
            return ByPage(config, log)
        return None


# Every browser test collected (before -k or --deselect), with the page it takes, if any:
# what tests/site/test_site.py checks `group_of` against.
COLLECTED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    tests = []
    for item in items:
        if item.path.parent == HERE:
            params = getattr(item, "callspec", None)
            tests.append(
                (item.nodeid, item.path.name, params.params.get("doc") if params else None)
            )
    config.stash[COLLECTED] = tests


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the session's own process; its workers inherit it
        os.environ[LOADS] = tempfile.mkdtemp(prefix="attention-book-page-loads-")


def record_load(key: tuple[str, str]) -> None:
    directory = os.environ.get(LOADS)
    if directory:  # (not set in a worker whose parent never read this file: nothing checks)
        with open(Path(directory) / f"{os.getpid()}.txt", "a") as f:
            f.write(" ".join(key) + "\n")


def pytest_sessionfinish(session):
    """In the process that ran the session (not in a worker): fail the run if a page of an
    edition was loaded more than once in one theme."""
    if hasattr(session.config, "workerinput") or LOADS not in os.environ:
        return
    directory = Path(os.environ[LOADS])
    loads = collections.Counter(
        line for f in directory.glob("*.txt") for line in f.read_text().splitlines()
    )
    shutil.rmtree(directory, ignore_errors=True)
    twice = sorted(f"{key} ({n} times)" for key, n in loads.items() if n > 1)
    if twice:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "pages loaded more than once (edition, page):\n  " + "\n  ".join(twice)
        if reporter:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def book_site():
    """The base URL of the book (_build/html)."""
    if not (HTML / "index.html").exists():
        pytest.fail("no built site in _build/html: run `make book` first")
    with serve_directory(HTML) as url:
        yield url


@pytest.fixture(scope="session")
def student_site():
    """The base URL of the student edition, served within the whole published site."""
    if not (STUDENT / "index.html").exists():
        pytest.fail("no published site in _build/pages: run `make pages` (make test does)")
    with serve_directory(PUBLISHED) as url:
        yield f"{url}/student"


@pytest.fixture(scope="session")
def ko_site():
    """The base URL of the Korean book, served within the whole published site (its link to
    each page in English leads there)."""
    if not (KO / "index.html").exists():
        pytest.fail("no Korean book in _build/pages/ko: run `make pages` (make test does)")
    with serve_directory(PUBLISHED) as url:
        yield f"{url}/ko"


@pytest.fixture(scope="session")
def ko_student_site():
    """The base URL of the Korean student edition, within the whole published site."""
    if not (KO_STUDENT / "index.html").exists():
        pytest.fail("no Korean student edition in _build/pages/ko/student: run `make pages`")
    with serve_directory(PUBLISHED) as url:
        yield f"{url}/ko/student"


@pytest.fixture(scope="session")
def loaded(request, browser):
    """loaded(edition, doc, scheme) -> LoadedPage: each page of each edition is loaded
    once per session, and read there in both themes (`load`); the pages that `load` keeps
    open for the explorer tests are closed at the end."""
    cache: dict[tuple[str, str], dict[str, LoadedPage] | BaseException] = {}

    def get(edition: str, doc: str, scheme: str = "light") -> LoadedPage:
        key = (edition, doc)
        if key not in cache:
            site = request.getfixturevalue(f"{edition}_site")
            record_load(key)
            try:
                cache[key] = load(browser, site, edition, doc)
            except Exception as exc:  # every check of this page fails with the same error
                cache[key] = exc
        if isinstance(cache[key], BaseException):
            raise cache[key]
        return cache[key][scheme]

    yield get
    for views in cache.values():
        if isinstance(views, dict) and views["light"].live is not None:
            views["light"].live[0].close()
