"""Stored outputs that any processor reproduces (scripts/fragility.py).

Strict nbval compares every output with the stored one, so an output whose digits hang on
round-off passes on the machine that stored it and fails on another processor (issue 33:
chapter 9's fitted self-weight printed 0.707 on one and 0.708 on another; chapter 6's
zero eigenvalue printed -0. on one OpenBLAS kernel and 0. on another). Here:

* no stored output prints a negative zero (the sign of a round-off);
* the perturbed kernel of ``scripts/fragility.py perturbed`` (the weekly check) moves every
  float draw by a relative 1e-13 and leaves the rest exact;
* strict nbval in that kernel fails on an output that hangs on round-off and passes a
  robust one.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import pickle
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import fragility  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stored_output_prints_a_negative_zero(path):
    found = fragility.negative_zeros(path)
    assert not found, (
        "a stored output prints a negative zero, the sign of a round-off, which another "
        "processor prints without its minus: print the number so that a zero has no sign "
        "(np.round(x, 4) + 0.0, or x + 0.0 before formatting; CONTRIBUTING.md, 'Outputs "
        "that do not depend on the processor'):\n" + "\n".join(map(str, found))
    )


def _notebook(*cells: tuple[str, list[dict]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for source, outputs in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        nb.cells.append(cell)
    return nb


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _data(mime: str, text: str, **metadata) -> dict:
    return {"output_type": "display_data", "data": {mime: text}, "metadata": metadata}


def test_the_search_finds_every_negative_zero_and_nothing_else(tmp_path):
    explorer = (
        '<div class="explorer"><img src="data:image/png;base64,iVBOR-0Kgo=" alt="x">'
        '<script type="application/json">{"alt":["lowest score -0.00","lowest 0.12"]}</script>'
        "<figcaption>lowest score -0.00</figcaption></div>"
    )
    nb = _notebook(
        ("print(eigenvalues)", [_stream("eigenvalues of Pi: [-0.     0.0609 1.     1.    ]\n")]),
        ("glue", [_data("text/plain", "'-0.000'", scrapbook={"name": "gap"})]),
        ("explorer", [_data("text/html", explorer)]),
        ("latex", [_data("text/latex", r"$x = -0$ and $-0.0e+00$")]),
        (
            "robust",
            [
                _stream("[-0.0609  0.  1e-05 -0.001] x-0.0 L0H2 -0.5 1-0 (-0.01)\n"),
                _data("text/html", '<p style="margin:-0">0.</p>'),
            ],
        ),
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    found = fragility.negative_zeros(path)
    assert [(f.cell, f.where) for f in found] == [
        (0, "stream"),
        (1, "text/plain"),
        (2, "text/html"),
        (2, "text/html"),  # the caption in the frames' data and the one shown
        (3, "text/latex"),
        (3, "text/latex"),
    ]
    assert found[0].context == "eigenvalues of Pi: [-0.     0.0609 1.     1.    ]"
    assert "nb.ipynb cell 1 (text/plain): '-0.000'" == str(found[1])


def _png(shade: int) -> str:
    from PIL import Image

    image = Image.new("RGB", (20, 10), "white")
    image.putpixel((3, 4), (shade, shade, shade))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def _explorer_html(alts: list[str], shades: list[int]) -> str:
    data = {"frames": [f"data:image/png;base64,{_png(v)}" for v in shades], "alt": alts}
    data["index"] = list(range(len(shades)))
    blob = json.dumps(data).replace("<", "\\u003c")
    return f'<div><script type="application/json" class="explorer-data">{blob}</script></div>'


def test_the_diff_shows_both_values_as_nbval_compares_them():
    stored = [
        _stream("eigenvalues: [0.   0.06]\nerror 3e-12, KL 1.2e-16\n"),
        _data("text/html", _explorer_html(["fit 0.707", "KL 1e-16"], [100, 100, 100])),
    ]
    now = [
        _stream("eigenvalues: [-0.   0.06]\nerror 5e-13, KL 3.4e-17\n"),
        _data("text/html", _explorer_html(["fit 0.708", "KL 3e-17"], [100, 104, 200])),
    ]
    assert fragility.compare_outputs(stored, now) == [
        "stream stdout, line 1:\n    stored: eigenvalues: [0.   0.06]\n"
        "    now:    eigenvalues: [-0.   0.06]",
        "explorer frame 0, caption:\n    stored: fit 0.707\n    now:    fit 0.708",
        "explorer picture 1: other bytes, the same picture: 1 pixels changed, by at most 4 of "
        "255 (0 by more than 8)",
        "explorer picture 2: other bytes, a different picture: 1 pixels changed, by at most "
        "100 of 255 (1 by more than 8)",
    ]
    assert fragility.compare_outputs(stored, stored) == []


@pytest.fixture
def plain_rng(monkeypatch):
    """The perturbation installed in this process; returns NumPy's own default_rng (which
    is put back after the test)."""
    plain = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", plain)
    fragility.install_perturbation(seed=1)
    return plain


def test_float_draws_move_by_at_most_1e_13_of_themselves(plain_rng):
    for draw in (
        lambda g: g.standard_normal((50, 40)),
        lambda g: g.normal(1.0, 2.0, size=1000),
        lambda g: g.uniform(-1, 1, size=1000),
        lambda g: g.random(1000),
        lambda g: g.gumbel(size=1000),
        lambda g: g.dirichlet(np.ones(5), size=200),
    ):
        moved, plain = draw(np.random.default_rng(7)), draw(plain_rng(7))
        relative = np.abs(moved / plain - 1)
        assert moved.shape == plain.shape and moved.dtype == plain.dtype
        assert (
            relative.max() <= 1.001 * fragility.RTOL and np.median(relative) > fragility.RTOL / 10
        )
    scalar = np.random.default_rng(7).normal()
    assert type(scalar) is float and 0 < abs(scalar / plain_rng(7).normal() - 1) <= 1.001e-13


def test_everything_but_float_draws_stays_exact(plain_rng):
    for draw in (
        lambda g: g.integers(0, 100, size=50),
        lambda g: g.permutation(20),
        lambda g: g.choice(10, size=5, replace=False),
        lambda g: g.permutation(np.linspace(0, 1, 7)),
        lambda g: g.standard_normal(10, dtype=np.float32),
    ):
        assert np.array_equal(draw(np.random.default_rng(3)), draw(plain_rng(3)))
    # The same stream of random bits: a perturbed draw uses none of its own.
    moved, plain = np.random.default_rng(3), plain_rng(3)
    moved.standard_normal(10), plain.standard_normal(10)
    assert np.array_equal(moved.integers(0, 1000, 20), plain.integers(0, 1000, 20))


def test_the_perturbation_is_fixed_by_its_seed_and_survives_copies(plain_rng, monkeypatch):
    first = np.random.default_rng(0).standard_normal(100)
    assert np.array_equal(first, np.random.default_rng(0).standard_normal(100))
    rng = np.random.default_rng(0)
    assert isinstance(rng, np.random.Generator) and np.random.default_rng(rng) is rng
    for copied in (copy.deepcopy(rng), pickle.loads(pickle.dumps(rng))):
        assert np.array_equal(copied.standard_normal(100), first)
    child, plain_child = rng.spawn(1)[0], plain_rng(0).spawn(1)[0]
    moved, plain = child.standard_normal(100), plain_child.standard_normal(100)
    assert type(child) is type(rng) and not np.array_equal(moved, plain)
    assert np.abs(moved / plain - 1).max() <= 1.001 * fragility.RTOL
    out = np.empty(100)
    np.random.default_rng(0).standard_normal(out=out)
    assert np.array_equal(out, first)
    monkeypatch.setattr(np.random, "default_rng", plain_rng)
    fragility.install_perturbation(seed=2)
    other_seed = np.random.default_rng(0).standard_normal(100)
    assert not np.array_equal(other_seed, first)
    assert np.abs(other_seed / first - 1).max() <= 2.001 * fragility.RTOL  # both moved


# A notebook stored with the outputs of a plain kernel: the first cell prints a draw to
# 17 digits (round-off shows), the second prints what no round-off can move.
FRAGILE = "import numpy as np\nrng = np.random.default_rng(0)\nprint(f'{rng.random():.17f}')"
ROBUST = (
    "import numpy as np\nrng = np.random.default_rng(0)\nx = rng.standard_normal(1000)\n"
    "print(f'{x.mean():.4f} {np.argsort(x)[:3]} {(x > 0).sum()}')"
)


def test_perturbed_nbval_fails_an_output_that_hangs_on_round_off(tmp_path):
    rng = np.random.default_rng(0)
    fragile = _notebook((FRAGILE, [_stream(f"{rng.random():.17f}\n")]))
    x = np.random.default_rng(0).standard_normal(1000)
    robust = _notebook((ROBUST, [_stream(f"{x.mean():.4f} {np.argsort(x)[:3]} {(x > 0).sum()}\n")]))
    for name, nb in (("fragile", fragile), ("robust", robust)):
        nb.cells[0].execution_count = 1
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    command = [sys.executable, str(ROOT / "scripts" / "fragility.py"), "perturbed", "-n", "1"]
    command += ["--seed", "1", str(tmp_path / "fragile.ipynb"), str(tmp_path / "robust.ipynb")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    summary = [line for line in result.stdout.splitlines() if line.startswith(("FAILED", "="))]
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert any("fragile.ipynb::Cell 0" in line for line in summary), result.stdout[-3000:]
    assert not any("robust.ipynb" in line for line in summary if "FAILED" in line)
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    assert "hang on round-off" in result.stdout


def test_the_weekly_workflow_runs_the_perturbed_check():
    workflow = (ROOT / ".github" / "workflows" / "portability.yml").read_text()
    assert "scripts/run_tests.py portable" in workflow and "schedule:" in workflow
    assert "OPENBLAS_CORETYPE" not in json.dumps(workflow)
