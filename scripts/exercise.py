"""Everything an exercise needs checked, for one chapter, in an order that runs nothing twice.

Usage: python scripts/exercise.py notebooks/NN_x.ipynb          (make exercise NB=...)
       python scripts/exercise.py --page notebooks/NN_x.ipynb   (make page NB=...)

`make exercise` runs, in this order:

1. format: `ruff format` and `ruff check --fix` of the chapter, helpers/ and tests/, first,
   so that the outputs and the editions below come from the code as committed (formatting
   after executing would change the chapter and its Colab edition again);
2. execute: the chapter re-executed with its outputs stored (scripts/execute_notebooks.py,
   which lists every output that changed);
3. editions: the Colab and student editions regenerated (scripts/colab_edition.py);
4. then two lanes side by side (each step's output printed whole when it ends):
   - `checks`: the tests of `make checks` (the self-checks' tests and doctests, the tables
     of slips, tests/test_exercises.py, the editions' tests) but those of LEFT_OUT, with
     those of MORE;
   - strict nbval of the chapter (a second execution: the stored outputs come back every
     time); the book's HTML (an incremental build); the browser tests of the chapter's page
     (tests/site/test_site.py narrowed with -k to the page: raw TeX, alt text, axe-core,
     figures, equations, explorers); `lint`.

A failure in steps 1-3 stops the run; in step 4 every step runs and the summary says which
failed. `--page` runs the last lane alone (`make page NB=...`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
BIN = Path(PY).parent
PYTEST = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts="]
# One thread each for the linear algebra, as scripts/run_tests.py (the lanes share 2 cores).
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Left out of `make checks` here: the staleness test of the Colab edition (step 3 has just
# written it with the same builder) and the builder's own tests on made-up notebooks
# (they test book/_ext, not a chapter: 55 s of the 140).
LEFT_OUT = [
    f"tests/test_colab_edition.py::{name}"
    for name in (
        "test_the_committed_edition_is_current",
        "test_every_construct_a_chapter_may_use_is_rendered",
        "test_a_construct_it_cannot_render_stops_the_build_with_a_clear_message",
        "test_a_solution_followed_by_plain_text_is_refused",
    )
]
# Added from `make unit`: install cells, links and file names; glue cells; no stored output
# printing a negative zero (15 s together).
MORE = [
    "tests/test_repository.py",
    "tests/test_glue_cells.py",
    "tests/test_outputs_portable.py::test_no_stored_output_prints_a_negative_zero",
]


def steps_for(nb: str) -> dict[str, list[list[str]]]:
    """Each step's commands, by name."""
    stem = Path(nb).stem
    code = [nb, "helpers", "tests"]
    return {
        "format": [[BIN / "ruff", "format", *code], [BIN / "ruff", "check", "--fix", *code]],
        "execute": [[PY, "scripts/execute_notebooks.py", nb]],
        "editions": [[PY, "scripts/colab_edition.py"]],
        "nbval": [
            [*PYTEST, "--nbval", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", nb],
        ],
        "checks": [
            [*PYTEST, "-n", "2", *checks_files(), *MORE, "--durations=5"]
            + [arg for test in LEFT_OUT for arg in ("--deselect", test)],
        ],
        "lint": [[PY, "scripts/run_tests.py", "lint"]],
        "html": [[PY, "scripts/book.py"]],
        # the English book's page (where the Korean edition exists, its pages need the
        # whole published site: `make html`, then `make browser`)
        "page": [[*PYTEST, "tests/site/test_site.py", "-k", f"notebooks/{stem} and not ko"]],
    }


def checks_files() -> list[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from run_tests import CHECKS  # the files of `make checks`

    return CHECKS


def run(commands: list[list[str]], log) -> bool:
    ok = True
    for command in commands:
        print("$", " ".join(str(c) for c in command), file=log, flush=True)
        ok &= (
            subprocess.run([str(c) for c in command], cwd=ROOT, stdout=log, stderr=log).returncode
            == 0
        )
    return ok


def lane(names: list[str], steps, results: dict, lock: threading.Lock) -> None:
    for name in names:
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as log:
            ok = run(steps[name], log)
            log.seek(0)
            text = log.read()
        seconds = time.perf_counter() - start
        results[name] = (ok, seconds)
        with lock:
            print(f"\n==== {name}: {'ok' if ok else 'FAILED'} in {seconds:.0f} s ====", flush=True)
            print(text, flush=True)


def main(argv: list[str]) -> int:
    page_only = "--page" in argv
    notebooks = [a for a in argv if a != "--page"]
    if len(notebooks) != 1 or not (ROOT / notebooks[0]).is_file():
        print("usage: make exercise NB=notebooks/NN_x.ipynb (or make page NB=...)")
        return 2
    nb = Path(notebooks[0]).resolve().relative_to(ROOT).as_posix()
    for key, value in ONE_THREAD.items():
        os.environ.setdefault(key, value)
    steps = steps_for(nb)
    results: dict[str, tuple[bool, float]] = {}
    start = time.perf_counter()
    first: list[str] = [] if page_only else ["format", "execute", "editions"]
    for name in first:
        t = time.perf_counter()
        print(f"\n==== {name} ====", flush=True)
        ok = run(steps[name], sys.stdout)
        results[name] = (ok, time.perf_counter() - t)
        if not ok:
            print(f"\n{name} FAILED: fix it and run `make exercise NB={nb}` again")
            return 1
    sys.path.insert(0, str(ROOT))
    from tests.conftest import ensure_chromium

    ensure_chromium()  # before the lanes (it may run apt-get)
    lanes = [["html", "page"]] if page_only else [["checks"], ["nbval", "html", "page", "lint"]]
    lock = threading.Lock()
    threads = [threading.Thread(target=lane, args=(names, steps, results, lock)) for names in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - start
    print(f"\n==== summary: {nb} ====")
    for name, (ok, seconds) in results.items():
        print(f"{name:9s} {'ok' if ok else 'FAILED':6s} {seconds:6.0f} s")
    print(f"{'total':16s} {total:6.0f} s")
    failed = [name for name, (ok, _) in results.items() if not ok]
    if failed:
        print(f"FAILED: {', '.join(failed)} (its output is above)")
        return 1
    if not page_only:
        print("Now commit the chapter, editions/, and what the exercise added (CONTRIBUTING.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
