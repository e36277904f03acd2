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
import contextlib
import copy
import io
import json
import os
import pickle
import re
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


def assert_no_negative_zero(path: Path) -> None:
    found = fragility.negative_zeros(path)
    assert not found, (
        "a stored output prints a negative zero, the sign of a round-off, which another "
        "processor prints without its minus: print the number so that a zero has no sign "
        "(np.round(x, 4) + 0.0, or x + 0.0 before formatting; CONTRIBUTING.md, 'Outputs "
        "that do not depend on the processor'):\n" + "\n".join(map(str, found))
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stored_output_prints_a_negative_zero(path):
    assert_no_negative_zero(path)


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
        ("latex", [_data("text/latex", r"$x = -0$ and $-0.0e+00$" " and \u22120.00")]),
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
        (3, "text/latex"),
    ]
    assert found[0].context == "eigenvalues of Pi: [-0.     0.0609 1.     1.    ]"
    assert "nb.ipynb cell 1 (text/plain): '-0.000'" == str(found[1])


def test_the_check_fails_on_a_planted_negative_zero(tmp_path):
    """Chapter 6's signed zero (issue 33) put back in a tiny notebook: the test above fails
    on it, naming the cell and the line; the same output printed carefully passes."""
    source = "print('eigenvalues of Pi:', np.round(np.linalg.eigvalsh(Pi), 4))"
    careless = "eigenvalues of Pi: [-0.     0.0609 1.     1.    ]\n"
    path = tmp_path / "nb.ipynb"
    nbformat.write(_notebook(("import numpy as np", []), (source, [_stream(careless)])), path)
    with pytest.raises(AssertionError, match="negative zero") as failure:
        assert_no_negative_zero(path)
    assert "nb.ipynb cell 1 (stream): eigenvalues of Pi: [-0.     0.0609 1." in str(failure.value)
    careful = careless.replace("-0.    ", " 0.    ")  # np.round(..., 4) + 0.0
    nbformat.write(_notebook(("import numpy as np", []), (source, [_stream(careful)])), path)
    assert_no_negative_zero(path)


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
        _stream("eigenvalues: [0.   0.06]\nerror 3e-12, KL 1.2e-16\nmin 6.7e-36\n"),
        _data("text/html", _explorer_html(["fit 0.707", "KL 1e-16"], [100, 100, 100])),
    ]
    now = [
        _stream("eigenvalues: [-0.   0.06]\nerror 5e-13, KL 3.4e-17\nmin 0\n"),
        _data("text/html", _explorer_html(["fit 0.708", "KL 3e-17"], [100, 104, 200])),
    ]
    assert fragility.compare_outputs(stored, now) == [
        "stream stdout, line 1:\n    stored: eigenvalues: [0.   0.06]\n"
        "    now:    eigenvalues: [-0.   0.06]",
        "stream stdout, line 3:\n    stored: min 6.7e-36\n    now:    min 0",  # unsanitized
        "explorer frame 0, caption:\n    stored: fit 0.707\n    now:    fit 0.708",
        "explorer picture 1: other bytes, the same picture: 1 pixels changed, by at most 4 of "
        "255 (0 by more than 8)",
        "explorer picture 2: other bytes, a different picture: 1 pixels changed, by at most "
        "100 of 255 (1 by more than 8)",
    ]
    assert fragility.compare_outputs(stored, stored) == []
    record = "application/papermill.record/text/plain"
    glued = [_data(record, "'3'", scrapbook={"name": "jac_rank_bad"})]
    now = [_data(record, "'2'", scrapbook={"name": "jac_rank_bad"})]
    assert fragility.compare_outputs(glued, now) == [
        "glue jac_rank_bad, line 1:\n    stored: '3'\n    now:    '2'"
    ]


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


# Outputs planted in a tiny notebook, each written carelessly (its printed digits hang on
# round-off) and carefully (they do not): (what is computed, careless print, careful print).
# Every computation starts from its own draws: DATA_SEED is filled in per kind.
PLANTED = {
    "a float printed whole": (
        "x = rng.standard_normal(1000)",
        "print('std of the draws:', x.std())",
        "print(f'std of the draws: {x.std():.6f}')",  # (a 1e-3 perturbation would move it)
    ),
    "the sign of a round-off": (
        "d = rng.standard_normal(6)\nd = d - d.mean()  # sums to zero in exact arithmetic",
        "print('sum of the centred draws:', np.round(d.sum(), 3))",
        "print('sum of the centred draws:', np.round(d.sum(), 3) + 0.0)",
    ),
    "a value at a rounding boundary": (
        "y = rng.standard_normal(10)\ny = y - y.mean() + 0.0125  # its mean is 0.0125",
        "print(f'mean {y.mean():.3f}')",
        "print(f'mean {y.mean():.4f}')",
    ),
    "a tie broken by round-off": (
        "a, b, c = rng.standard_normal(3)\ns = np.array([(a + b) + c, a + (b + c)])  # equal",
        "print('largest score at', s.argmax())",
        "print('largest score at', np.flatnonzero(s >= s.max() - 1e-9 * np.abs(s).max())[0])",
    ),
}
SETUP = "import numpy as np\n\nrng = np.random.default_rng({data_seed})\n"


def _printed(source: str, namespace: dict) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(source, namespace)
    return out.getvalue()


def _outputs(kind: str, data_seed: int) -> tuple[str, str]:
    """What the careless and the careful cell of `kind` print, here (the plain kernel, or
    the perturbed one when it is installed in this process)."""
    compute, careless, careful = PLANTED[kind]
    namespace: dict = {}
    _printed(SETUP.format(data_seed=data_seed) + compute, namespace)
    return _printed(careless, namespace), _printed(careful, namespace)


def test_two_seeds_catch_most_careless_outputs_and_no_careful_one(monkeypatch):
    """In this process, over 100 draws of each planted computation: the perturbation of one
    seed changes about half of the careless outputs (the sign of a round-off flips with
    probability 1/2), the two seeds of the weekly check most of them, and never a careful
    one. With a perturbation too small to move the round-off, nothing would be caught."""
    plain_rng = np.random.default_rng
    plain = {kind: [_outputs(kind, k) for k in range(100)] for kind in PLANTED}
    changed = {}
    for seed, _features_off in fragility.RUNS:
        monkeypatch.setattr(np.random, "default_rng", plain_rng)
        fragility.install_perturbation(seed)
        for kind in PLANTED:
            now = [_outputs(kind, k) for k in range(100)]
            assert [c for _, c in now] == [c for _, c in plain[kind]], kind  # careful: same
            changed[kind, seed] = {k for k in range(100) if now[k][0] != plain[kind][k][0]}
    seeds = [seed for seed, _ in fragility.RUNS]
    for kind in PLANTED:
        either = set.union(*(changed[kind, seed] for seed in seeds))
        share = {seed: len(changed[kind, seed]) for seed in seeds}
        least = 50 if kind != "a tie broken by round-off" else 25  # a tie needs unequal sums
        assert len(either) >= least, (kind, share, len(either))


def _planted_notebook(monkeypatch) -> tuple[nbformat.NotebookNode, dict[int, tuple[str, str]]]:
    """The planted notebook stored with this process's (the plain kernel's) outputs, each
    careless cell with draws that the perturbation of seed 1 changes (whether a given
    round-off moves is a coin toss: the first such draws are taken). Returns the notebook
    and, for each careless cell (code cells counted from 0), its stored and perturbed output."""
    plain_rng = np.random.default_rng
    nb = _notebook()
    moved = {}
    for kind, (compute, careless, careful) in PLANTED.items():
        for data_seed in range(1000):
            monkeypatch.setattr(np.random, "default_rng", plain_rng)
            stored = _outputs(kind, data_seed)
            fragility.install_perturbation(seed=1)
            if _outputs(kind, data_seed)[0] != stored[0]:
                break
        moved[len(nb.cells)] = (stored[0], _outputs(kind, data_seed)[0])
        setup = SETUP.format(data_seed=data_seed) + compute + "\n"
        for source, text in ((setup + careless, stored[0]), (careful, stored[1])):
            cell = nbformat.v4.new_code_cell(source, execution_count=len(nb.cells) + 1)
            cell.outputs = [nbformat.from_dict(_stream(text))]
            nb.cells.append(cell)
    monkeypatch.setattr(np.random, "default_rng", plain_rng)
    return nb, moved


def test_perturbed_nbval_fails_each_careless_output_and_passes_each_careful_one(
    tmp_path, monkeypatch, capsys
):
    nb, moved = _planted_notebook(monkeypatch)
    path = tmp_path / "planted.ipynb"
    nbformat.write(nb, path)
    command = [sys.executable, str(ROOT / "scripts" / "fragility.py"), "perturbed", "-n", "1"]
    result = subprocess.run(
        [*command, "--seed", "1", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    report = result.stdout[-4000:] + result.stderr[-2000:]
    failed = {int(m) for m in re.findall(r"^FAILED .*::Cell (\d+)", result.stdout, re.M)}
    assert result.returncode == 1 and failed == set(moved), report
    assert f"{len(moved)} failed, {len(nb.cells) - len(moved)} passed" in result.stdout, report
    assert "hang on round-off" in result.stdout and "--seed 1" in result.stdout, report
    # The diff names each careless cell with both of its values, and nothing else.
    capsys.readouterr()
    assert fragility.run_diff([str(path)], seed=1) == len(moved)
    printed = capsys.readouterr().out
    assert printed.endswith(f"{len(moved)} cells differ\n"), printed
    for cell, (stored, now) in moved.items():
        assert f"planted.ipynb cell {cell}:\n  stream stdout, line 1:\n" in printed, printed
        assert f"    stored: {stored.strip()}\n    now:    {now.strip()}" in printed, printed


def test_the_kernels_turn_off_numpys_avx2_and_avx512_paths_by_their_names(tmp_path):
    """The second run's NumPy feature names are this NumPy's (an unknown name is ignored:
    NumPy 1's AVX2 would turn nothing off in NumPy 2), and its kernel spec sets them."""
    disable = dict(fragility.RUNS)[2]
    name = fragility.kernel_spec_dir(tmp_path, 2, disable=disable)
    spec = json.loads((tmp_path / "kernels" / name / "kernel.json").read_text())
    assert spec["env"] == {"NPY_DISABLE_CPU_FEATURES": disable}
    assert spec["argv"][-4:] == ["--rtol", repr(fragility.RTOL), "-f", "{connection_file}"]
    probe = (
        "import json; from numpy._core._multiarray_umath import __cpu_dispatch__, "
        "__cpu_features__; print(json.dumps([__cpu_dispatch__, __cpu_features__]))"
    )
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disable}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    dispatch, features = json.loads(out.stdout)
    for feature in disable.split():
        assert feature in dispatch and not features[feature], (feature, dispatch)


def test_the_check_is_wired_weekly_and_by_make_not_in_make_test():
    workflow = (ROOT / ".github" / "workflows" / "portability.yml").read_text()
    assert "scripts/run_tests.py portable" in workflow and "schedule:" in workflow
    assert "fragility.py perturbed --seed" in workflow  # and a new seed every week
    assert "OPENBLAS_CORETYPE" not in workflow  # (some machines set it to avoid crashes)
    makefile = (ROOT / "Makefile").read_text()
    assert "\n\t$(PY) scripts/run_tests.py portable $(NB)\n" in makefile
    sys.path.insert(0, str(ROOT / "scripts"))
    import run_tests

    assert "portable" in run_tests.STEPS and "portable" not in run_tests.DEFAULT
