"""The Colab path: every chapter runs, unchanged, on Colab's software.

A Python 3.13 virtual environment gets exactly the versions of Colab's runtime (its
published pip freeze, August 2026) for the packages the book uses (built once per set of
versions, and kept in ~/.cache/attention-book/colab-env). The helpers
package is installed from a clean clone of this repository's HEAD the way each chapter's
install cell does it (`pip install "attention-book-helpers @ git+URL@REF"`, here with the
local clone's URL and HEAD's commit), and every chapter's Colab edition at HEAD (the
notebook the Colab button opens, editions/colab/NN_topic.ipynb) and its student notebook
(editions/student/NN_topic.ipynb, which the student edition's Colab button opens) are
copied into an empty temporary directory and executed there.

After the last cell, one more cell runs every self-check of the chapter the way a grader
does (helpers.checks.run_self_check on the notebook's own functions): on the Colab
edition every reference solution passes; on the student notebook every starting cell is
"not attempted", and each check cell showed that sentence, not a traceback.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.conftest import sample
from tests.notebook_bootstrap import DISTRIBUTION, ROOT, bootstrap_source, install_spec

pytestmark = pytest.mark.slow

COLAB_PINS = {
    "numpy": "2.1.3",
    "matplotlib": "3.10.0",
    "ipywidgets": "7.7.1",
    "ipython": "7.34.0",
    "ipykernel": "6.17.1",
}
# The notebook runner itself (not part of Colab's runtime, but it must not move the pins).
RUNNER = ["nbclient", "nbformat"]

RUN_NOTEBOOK = r"""
import sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, path)
"""


def python313() -> str:
    """A Python 3.13 interpreter: $COLAB_PYTHON, pyenv's, or python3.13 on PATH."""
    candidates = [os.environ.get("COLAB_PYTHON", "")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    candidates += [shutil.which("python3.13") or ""]
    for c in candidates:
        if not c or not Path(c).exists():
            continue
        probe = subprocess.run(
            [c, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 13)":
            return c
    pytest.fail("Python 3.13 (Colab's version) not found: set COLAB_PYTHON or install it")


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, check=False, text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return result


# Colab's environment is built once per requirements and kept outside the repository (a
# package inside it would look like the work tree's), in ~/.cache/attention-book/colab-env/
# (or $XDG_CACHE_HOME's), one folder per clone and, in it, one per HASH of the
# interpreter's version, the pins and the runner: an unchanged environment is not
# reinstalled. The helpers package is reinstalled in it from HEAD's commit whenever HEAD
# moves. A lock makes the pytest-xdist workers share one build.
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "attention-book"
    / "colab-env"
    / hashlib.sha256(str(ROOT).encode()).hexdigest()[:16]
)


def requirements_hash(python: str) -> str:
    version = run(python, "-c", "import sys; print(sys.version)").stdout
    key = json.dumps([version, COLAB_PINS, RUNNER], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@pytest.fixture(scope="session")
def colab_env() -> Path:
    python = python313()
    home = CACHE / requirements_hash(python)
    venv = home / "venv"
    py = venv / "bin" / "python"
    constraints = home / "colab-constraints.txt"
    pins = [f"{name}=={version}" for name, version in COLAB_PINS.items()]
    head = run("git", "-C", str(ROOT), "rev-parse", "HEAD").stdout.strip()
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "built").exists():
            for old in CACHE.iterdir():  # an environment for other requirements
                if old.is_dir():
                    shutil.rmtree(old)
            home.mkdir()
            run(python, "-m", "venv", str(venv))
            constraints.write_text("\n".join(pins) + "\n")
            run(str(py), "-m", "pip", "install", "--quiet", *pins, *RUNNER, "-c", str(constraints))
            (home / "built").touch()
        if (home / "helpers-commit").exists() and (home / "helpers-commit").read_text() == head:
            return py
        # The install cell's own requirement, pointed at this clone and HEAD's commit.
        run(str(py), "-m", "pip", "uninstall", "--quiet", "--yes", DISTRIBUTION)
        spec = install_spec(url=f"file://{ROOT}", ref=head)
        run(str(py), "-m", "pip", "install", "--quiet", spec, "-c", str(constraints))
        (home / "helpers-commit").write_text(head)
    return py


def test_environment_has_colab_versions(colab_env):
    code = (
        "import sys, importlib.metadata as m;"
        f"print(sys.version_info[:2]);"
        f"print({{n: m.version(n) for n in {list(COLAB_PINS)!r}}})"
    )
    out = run(str(colab_env), "-c", code, cwd=tempfile.gettempdir()).stdout.splitlines()
    assert out[0] == "(3, 13)"
    assert eval(out[1]) == COLAB_PINS


def test_helpers_come_from_the_clone_not_the_work_tree(colab_env):
    # From a directory outside the repository: `python -c` puts the working directory first
    # on sys.path, and the repository root would shadow the installed package.
    code = "import helpers; print(helpers.__file__)"
    where = run(str(colab_env), "-c", code, cwd=tempfile.gettempdir()).stdout.strip()
    assert "site-packages" in where and str(ROOT) not in where


def head_notebooks(edition: str = "colab") -> list[str]:
    """The Colab (or student) editions of the chapters committed at HEAD (the notebooks
    the Colab buttons open; the same revision as the installed package)."""
    listing = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", "HEAD", f"editions/{edition}/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(p for p in listing if re.fullmatch(rf"editions/{edition}/\d\d_\w+\.ipynb", p))


# `make test` runs chapter 1's Colab and student notebooks here, in English and in
# Korean (the Colab edition's own cells and the solutions, the student notebook's starting
# cells, the Korean install cell, on Colab's versions); `make test-full` (the weekly
# workflow, tests/conftest.py's FULL) every chapter's: each run is a whole chapter, 15 to
# 45 s (120 s for chapter 8's beside another), and every chapter runs on the project's
# versions in nbval. (Every chapter's student notebook ran here in `make test` until
# make test had to fit in ten minutes: 250 s of its 27 minutes.)
NOTEBOOKS = sample(head_notebooks(), {"01_softmax"})
STUDENT_NOTEBOOKS = sample(head_notebooks("student"), {"01_softmax"})
KO_NOTEBOOKS = sample(head_notebooks("ko/colab"), {"01_softmax"})
KO_STUDENT_NOTEBOOKS = sample(head_notebooks("ko/student"), {"01_softmax"})
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def install_source(path: str) -> str:
    """The first code cell of an edition's notebook: the install cell (the Korean one also
    sets helpers' language, scripts/ko_edition.py)."""
    if not path.startswith("editions/ko/"):
        return bootstrap_source()
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import ko_edition

    return ko_edition.install_source()


# Appended to a notebook before it runs: the grader's verdict on every self-check of the
# chapter, as one JSON line (the pairs come from the student notebook's metadata).
SELF_CHECKS = """\
import json as _json
import helpers.checks as _checks
print("SELF-CHECKS", _json.dumps([
    _checks.run_self_check(_check, globals(), _name).to_dict() for _check, _name in {pairs!r}
]))
"""


def self_check_pairs(path: str) -> list[list[str]]:
    """[check, function] of every self-check of the chapter (the student notebook's list)."""
    student = f"editions/student/{Path(path).name}"
    text = run("git", "-C", str(ROOT), "show", f"HEAD:{student}").stdout
    exercises = nbformat.reads(text, as_version=4).metadata["student_edition"]["exercises"]
    return [pair for exercise in exercises.values() for pair in exercise["checks"]]


@pytest.mark.parametrize(
    "path",
    NOTEBOOKS + STUDENT_NOTEBOOKS + KO_NOTEBOOKS + KO_STUDENT_NOTEBOOKS,
    ids=lambda p: "/".join(Path(p).parts[1:]),
)
def test_chapter_runs_on_colab_stack(colab_env, path):
    # The notebook as committed at HEAD, like the package: one revision for both.
    text = run("git", "-C", str(ROOT), "show", f"HEAD:{path}").stdout
    nb = nbformat.reads(text, as_version=4)
    student = "/student/" in path
    korean = path.startswith("editions/ko/")
    pairs = self_check_pairs(path)
    assert pairs, f"{path}: no self-check to run"
    nb.cells.append(nbformat.v4.new_code_cell(SELF_CHECKS.format(pairs=pairs)))
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code.source == install_source(path)
    path = Path(path)
    with tempfile.TemporaryDirectory() as empty:
        target = Path(empty) / path.name
        nbformat.write(nb, target)
        env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": ""}
        env.pop("MPLBACKEND")
        result = subprocess.run(
            [str(colab_env), "-c", RUN_NOTEBOOK, str(target), empty],
            text=True,
            capture_output=True,
            env=env,
            cwd=empty,
            check=False,
        )
        assert result.returncode == 0, (
            f"{path.name} failed on the Colab stack:\n{result.stderr[-4000:]}"
        )
        executed = nbformat.read(target, as_version=4)
        assert sorted(os.listdir(empty)) == [path.name], (
            "the chapter wrote files into its directory"
        )
    errors = [
        o
        for c in executed.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors
    first_executed = next(c for c in executed.cells if c.cell_type == "code")
    assert first_executed.outputs == [], "the install cell printed something outside Colab"
    # Explorers under ipywidgets 7: the static explorer (asking to run the cell), then the
    # live widget's view of a model that the kernel created.
    explorers = 0
    for cell in executed.cells:
        outputs = cell.get("outputs", [])
        for k, output in enumerate(outputs):
            if 'class="explorer"' in output.get("data", {}).get("text/html", ""):
                explorers += 1
                assert "explorer-hint" in output["data"]["text/html"]
                view = outputs[k + 1]["data"]["application/vnd.jupyter.widget-view+json"]
                assert view["model_id"] and view["version_major"] == 2
    assert explorers >= 1, f"{path.name}: no explorer was displayed"
    # The grader's verdicts, from the cell appended above.
    printed = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    verdicts = json.loads(printed.split("SELF-CHECKS", 1)[1])
    expected = "not attempted" if student else "passed"
    wrong = [v for v in verdicts if v["status"] != expected]
    assert len(verdicts) == len(pairs) and not wrong, f"{path}: expected {expected}: {wrong}"
    if student:
        checks = [
            c
            for c in executed.cells
            if c.metadata.get("student_edition", {}).get("role") == "check"
        ]
        assert len(checks) == len(pairs)
        for cell in checks:
            shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
            assert shown and "Traceback" not in shown, shown
            # In Korean once helpers words its reports in the language set (set_language)
            assert "not attempted yet" in shown or (korean and HANGUL.search(shown)), shown


def test_every_chapter_at_head_has_its_colab_and_student_notebooks():
    chapters = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", "HEAD", "notebooks/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = sorted(Path(p).name for p in chapters if re.fullmatch(r"notebooks/\d\d_\w+\.ipynb", p))
    assert names and [Path(p).name for p in head_notebooks()] == names
    assert [Path(p).name for p in head_notebooks("student")] == names
    assert STUDENT_NOTEBOOKS and set(STUDENT_NOTEBOOKS) <= set(head_notebooks("student"))
    assert NOTEBOOKS and set(NOTEBOOKS) <= set(head_notebooks())  # the sample, or all
    assert [Path(p).name for p in head_notebooks("ko/colab")] == names
    assert [Path(p).name for p in head_notebooks("ko/student")] == names
    assert KO_NOTEBOOKS and set(KO_NOTEBOOKS) <= set(head_notebooks("ko/colab"))
    assert KO_STUDENT_NOTEBOOKS and set(KO_STUDENT_NOTEBOOKS) <= set(head_notebooks("ko/student"))
