"""Fixtures shared by the tests: a local HTTP server and headless Chromium.

Browser tests drive Debian's Chromium through Python playwright (never a browser that
playwright downloads). The `browser` fixture installs Debian's Chromium when it is
missing (so only the tests that need a browser wait for it); a test that needs it fails,
never skips, when it cannot be had. One browser per session (per pytest-xdist worker).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# `make test` runs every test within ten minutes on two cores; a few tests repeat for
# every chapter what a sample of chapters already shows (grading each chapter's reference
# solutions in the sealed grader, each chapter's Colab edition on Colab's versions), and
# run for the sample only. `make test-full` (BOOK_TEST_FULL=1; the weekly workflow
# full.yml) runs them for every chapter.
FULL = os.environ.get("BOOK_TEST_FULL", "") == "1"


def sample(items: list, keep: set[str], key=lambda item: str(item)) -> list:
    """``items`` under ``make test-full``; otherwise those whose key contains one of
    ``keep`` (the sample)."""
    return list(items) if FULL else [i for i in items if any(k in key(i) for k in keep)]


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def once_per_session(tmp_path_factory, name: str, compute):
    """``compute(folder)`` run once per test session, its JSON-able result shared by every
    pytest-xdist worker and every module fixture that asks for it again.

    A module fixture runs once per worker, and again in the same worker each time the
    scheduler hands it the module's tests after another module's (worksteal): grading a
    class in a module fixture graded it three times in one `make unit`. This keeps the
    result (or the error) beside the workers' temporary directories, under a lock: the
    first caller computes, the others wait for it and read it."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    saved = root / f"once-{name}.json"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            folder = root / f"once-{name}"
            folder.mkdir(exist_ok=True)
            try:
                value = {"result": compute(folder)}
            except BaseException as exc:  # kept: the other fixtures fail the same way
                value = {"error": f"{type(exc).__name__}: {exc}"}
            saved.write_text(json.dumps(value))
        value = json.loads(saved.read_text())
    if "error" in value:
        pytest.fail(f"{name}, computed once for the session, failed: {value['error']}")
    return value["result"]


def korean_font_installed() -> bool:
    """Whether fontconfig knows a font with Korean glyphs (the Korean pages need one)."""
    if not shutil.which("fc-list"):
        return False
    found = subprocess.run(["fc-list", ":lang=ko"], capture_output=True, text=True, check=False)
    return bool(found.stdout.strip())


def ensure_chromium() -> None:
    """Install Debian's Chromium when no Chromium is on PATH, and Debian's Noto CJK fonts
    when no font has Korean glyphs (as root, or with sudo).

    Under a lock, so that two pytest-xdist workers never run apt-get at once."""
    names = ("chromium", "chromium-browser", "google-chrome")
    have = os.environ.get("CHROMIUM") or any(shutil.which(n) for n in names)
    if have and korean_font_installed():
        return
    if have:
        lock = Path(tempfile.gettempdir()) / "attention-book-chromium.lock"
        with lock.open("w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            if korean_font_installed():
                return
            sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
            print("No font with Korean glyphs: installing Debian's fonts-noto-cjk", flush=True)
            subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"]
            subprocess.run(
                [*sudo, *install, "fonts-noto-cjk"],
                check=True,
                env=env,
            )
        return
    lock = Path(tempfile.gettempdir()) / "attention-book-chromium.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if any(shutil.which(n) for n in names):
            return
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        print("Chromium is missing: installing Debian's chromium package", flush=True)
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        packages = ["chromium", "fonts-liberation", "fonts-dejavu-core", "fonts-noto-cjk"]
        subprocess.run(
            [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            check=True,
            env=env,
        )


def chromium_executable() -> str:
    """The system Chromium: $CHROMIUM, or the first of the usual names on PATH."""
    candidates = [os.environ.get("CHROMIUM", "")]
    candidates += ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    for name in candidates:
        if name and (path := shutil.which(name)):
            return path
    pytest.fail("no Chromium found: install Debian's `chromium` (make test does) or set CHROMIUM")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 (a free port) for the duration; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    ensure_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_executable(), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()
