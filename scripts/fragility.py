"""Outputs that depend on the processor: find them on one machine.

The book promises that every stored output is what the code computes, on every processor.
Two kinds of output break that promise while passing strict nbval on the machine that
stored them, because their digits hang on round-off, which differs between processors
(OpenBLAS and NumPy pick other vectorised kernels, so sums are added in another order):

* a number that is zero in exact arithmetic printed at a precision that hides its size
  shows its round-off's sign: ``[-0.  0.06 1.]`` on one processor, ``[0.  0.06 1.]`` on
  another;
* a digit that a last-bit change can move: a non-convex fit that falls into another
  optimum, a value within round-off of a rounding boundary, a tie broken by round-off,
  a comparison that hinges on the last bit.

Two checks find them here:

``negative-zeros [NB ...]``
    Every stored output (text, HTML, glued values, explorer captions) searched for a
    number printed as a negative zero (``-0.``, ``-0.000``, ``-0``, ``-0.0e+00``): the
    sign of a round-off, which another processor may print without its minus. Instant;
    ``tests/test_outputs_portable.py`` runs it in ``make test``.

``perturbed [--seed S ...] [NB ...]``
    Strict nbval of the chapters (the project's sanitize file and figure comparison, as in
    ``make test``) in a kernel whose random draws are perturbed: every float that a
    ``numpy.random.default_rng`` generator draws is multiplied by ``1 + 1e-13 u``, with
    ``u`` in [-1, 1) a fixed function of the draw and the seed (about 500 units in the
    last place, more than two processors' round-off differs by). Every computation then
    rounds differently, as on another processor, while integer draws, permutations and
    every number written in the code stay exact. An output whose shown digits do not
    depend on round-off is unchanged; one that does changes (a zero's sign flips with
    probability 1/2 per seed, so the check runs two seeds). One execution of every
    chapter per seed: the weekly workflow (``.github/workflows/portability.yml``) runs
    it, and a third time with a seed that changes every week (a fixed seed misses a
    given fragile output for good with probability about 1/4); after changing a chapter,
    ``make portable NB=notebooks/NN_x.ipynb`` runs it on that chapter. A failure prints
    the ``diff`` command that shows both values.

``diff [--seed S] [--disable FEATURES] NB ...``
    Execute the notebooks (in the perturbed kernel of seed S, or the plain one) and print
    every output that differs from the stored one, as strict nbval compares them, with
    both values.

``kernel --seed S -f CONNECTION_FILE``
    The perturbed kernel itself (what the kernel spec of ``perturbed`` starts).

Diagnostics on a processor's other kernels (never in the tests or CI: some machines set
``OPENBLAS_CORETYPE`` to avoid crashes), for one command:
``OPENBLAS_CORETYPE=Prescott make nbval`` (also Nehalem, SandyBridge, Haswell, SkylakeX
where the processor has AVX-512), and ``NPY_DISABLE_CPU_FEATURES=X86_V3 make nbval``
(NumPy 2.4's name for the AVX2 group; ``X86_V4`` for AVX-512).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------
# Negative zeros in stored outputs
# ---------------------------------------------------------------------------

#: A number that rounded to zero and kept its minus sign ("-0", "-0.", "-0.000",
#: "-0.0e+00", or with the typographic minus U+2212 that Matplotlib's formatters use),
#: not part of a longer number ("-0.06", "1e-05") or of a word ("x-0").
NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212]0(?:\.0*)?(?:[eE][+-]?0+)?(?![\w.])")
# What is not printed text in an HTML output: a figure's bytes and markup.
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
_TAG = re.compile(r"<[^>]*>")
_TEXT_MIME = ("text/plain", "text/html", "text/markdown", "text/latex")


@dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int  # the code cell's number as nbval counts it (code cells from 0)
    where: str  # "stream", "text/plain", ...
    context: str  # the line around the number

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell} ({self.where}): {self.context}"


def _texts(output: dict) -> Iterator[tuple[str, str]]:
    """(kind, text) of each printed text of one output, HTML reduced to what it shows."""
    if output.get("output_type") == "stream":
        yield "stream", _joined(output.get("text", ""))
    elif output.get("output_type") == "error":
        yield "error", _joined(output.get("evalue", ""))
    for mime in _TEXT_MIME:
        if mime in output.get("data", {}):
            text = _joined(output["data"][mime])
            if mime == "text/html":
                # An explorer's captions are in its JSON; its frames are base64.
                text = _TAG.sub(" ", _DATA_URI.sub("", text))
            yield mime, text


def _joined(text: str | list[str]) -> str:
    return "".join(text) if isinstance(text, list) else text


def negative_zeros(path: Path) -> list[Finding]:
    """Every number printed as a negative zero in the stored outputs of notebook `path`."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    found = []
    code = [c for c in cells if c["cell_type"] == "code"]
    for k, cell in enumerate(code):
        for output in cell.get("outputs", []):
            for where, text in _texts(output):
                for match in NEGATIVE_ZERO.finditer(text):
                    line_start = text.rfind("\n", 0, match.start()) + 1
                    line_end = text.find("\n", match.end())
                    line = text[line_start : None if line_end < 0 else line_end]
                    if len(line) > 120:  # a long line: the 50 characters either side
                        a = max(match.start() - line_start - 50, 0)
                        line = "..." + line[a : a + 100 + len(match.group())] + "..."
                    found.append(Finding(Path(path).name, k, where, line.strip()))
    return found


# ---------------------------------------------------------------------------
# The perturbed kernel
# ---------------------------------------------------------------------------

#: Relative size of the perturbation of each float draw: about 500 units in the last
#: place of a float64, far above the round-off two processors' kernels differ by
#: (a few units in a sum's last place, grown by what follows), far below what any output
#: prints (a robust output shows no digit finer than about 1e-9 relative).
RTOL = 1e-13

# Generator methods whose results are floats drawn from a distribution.
_FLOAT_DRAWS = (
    "random",
    "standard_normal",
    "normal",
    "uniform",
    "standard_exponential",
    "exponential",
    "standard_gamma",
    "gamma",
    "beta",
    "chisquare",
    "noncentral_chisquare",
    "f",
    "noncentral_f",
    "standard_cauchy",
    "standard_t",
    "vonmises",
    "pareto",
    "weibull",
    "power",
    "laplace",
    "gumbel",
    "logistic",
    "lognormal",
    "rayleigh",
    "wald",
    "triangular",
    "dirichlet",
    "multivariate_normal",
)


def _mix(bits, seed: int):
    """A fixed pseudo-random function of 64-bit words (splitmix64's finaliser)."""
    import numpy as np

    with np.errstate(over="ignore"):
        z = bits ^ np.uint64((0x9E3779B97F4A7C15 * (seed + 1)) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def perturb(values, seed: int, rtol: float = RTOL):
    """``values * (1 + rtol u)``, u in [-1, 1) a fixed function of each value and `seed`.

    Float64 arrays are changed in place (and returned), Python floats returned perturbed;
    anything else (integers, float32) is returned as it is.
    """
    import numpy as np

    if isinstance(values, float):  # a Python float (or a NumPy scalar): the same type
        return type(values)(perturb(np.array([values], dtype=np.float64), seed, rtol)[0])
    if not isinstance(values, np.ndarray) or values.dtype != np.float64:
        return values
    u = _mix(values.view(np.uint64), seed) >> np.uint64(11)  # 53 random bits
    values *= 1.0 + rtol * (u * (2.0**-52) - 1.0)
    return values


def install_perturbation(seed: int, rtol: float = RTOL) -> None:
    """Make ``numpy.random.default_rng`` return generators whose float draws are perturbed
    (see :func:`perturb`); integer draws, permutations and choices are unchanged."""
    import numpy as np

    base = np.random.Generator
    plain_default_rng = np.random.default_rng

    def draw(name: str):
        method = getattr(base, name)

        def perturbed(self, *args, **kwargs):
            return perturb(method(self, *args, **kwargs), seed, rtol)

        perturbed.__name__ = perturbed.__qualname__ = name
        perturbed.__doc__ = method.__doc__
        return perturbed

    def default_rng(seed=None):
        rng = plain_default_rng(seed)
        return (
            rng if isinstance(rng, perturbed_generator) else perturbed_generator(rng.bit_generator)
        )

    namespace = {name: draw(name) for name in _FLOAT_DRAWS if hasattr(base, name)}
    # Copies and pickles stay perturbed (the base class would rebuild a plain Generator);
    # the class keeps the name Generator, so that a printed generator reads the same.
    namespace["__reduce__"] = lambda self: (default_rng, (self.bit_generator,))
    perturbed_generator = type("Generator", (base,), namespace)
    default_rng.__doc__ = plain_default_rng.__doc__
    default_rng.__module__ = "numpy.random"  # where pickle finds it
    default_rng.__qualname__ = "default_rng"
    np.random.default_rng = default_rng


def kernel(argv: list[str]) -> None:
    """Start an IPython kernel with the perturbation installed."""
    parser = argparse.ArgumentParser(prog="fragility.py kernel")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rtol", type=float, default=RTOL)
    args, rest = parser.parse_known_args(argv)
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]  # scripts/ (as ipykernel_launcher drops the working directory)
    install_perturbation(args.seed, args.rtol)
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *rest]
    kernelapp.launch_new_instance()


def kernel_spec_dir(directory: Path, seed: int, rtol: float = RTOL, disable: str = "") -> str:
    """Write a kernel spec named ``book-perturbed-SEED`` under `directory` (a JUPYTER_PATH
    entry), with NumPy's CPU features `disable` turned off; return its name."""
    name = f"book-perturbed-{seed}"
    spec = directory / "kernels" / name
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "kernel", "--seed", str(seed)]
    argv += ["--rtol", repr(rtol), "-f", "{connection_file}"]
    kernel_json = {
        "argv": argv,
        "display_name": f"Python 3 (random draws perturbed, seed {seed})",
        "language": "python",
    }
    if disable:
        kernel_json["env"] = {"NPY_DISABLE_CPU_FEATURES": disable}
    (spec / "kernel.json").write_text(json.dumps(kernel_json))
    return name


#: The runs of the weekly check: (seed, NumPy CPU features turned off). Two seeds, so that
#: a round-off's sign flips in at least one with probability 3/4 (each draw's perturbation
#: is fixed by the seed: a failure is reproducible); the second also takes NumPy's
#: baseline code paths instead of its AVX2 and AVX-512 ones (NumPy 2's groups X86_V3 and
#: X86_V4; a name the processor lacks is ignored), as a processor without them does.
RUNS = ((1, ""), (2, "X86_V4 X86_V3"))


def nbval_command(notebooks: list[str], kernel_name: str, workers: int) -> list[str]:
    """Strict nbval as ``make test`` runs it, in the kernel named `kernel_name`."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts="]
    command += ["--nbval", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
    command += ["--nbval-kernel-name", kernel_name, "-rf"]
    if workers > 1:
        command += ["-n", str(workers), "--dist", "loadfile"]
    return [*command, *notebooks]


def run_perturbed(
    notebooks: list[str],
    runs: tuple[tuple[int, str], ...] = RUNS,
    rtol: float = RTOL,
    workers: int = 2,
) -> bool:
    """Strict nbval of `notebooks` once per (seed, NumPy features off) of `runs` in the
    perturbed kernel; True if every run passes."""
    named = " ".join(notebooks) or "notebooks/*.ipynb"
    notebooks = notebooks or sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    failed = []
    with tempfile.TemporaryDirectory() as jupyter_path:
        env = dict(os.environ)
        env["JUPYTER_PATH"] = os.pathsep.join(
            [jupyter_path, *filter(None, [os.environ.get("JUPYTER_PATH")])]
        )
        for seed, disable in runs:
            name = kernel_spec_dir(Path(jupyter_path), seed, rtol, disable)
            command = nbval_command(notebooks, name, workers)
            off = f", NPY_DISABLE_CPU_FEATURES={disable!r}" if disable else ""
            print(
                f"$ {' '.join(command)}\n  (random draws perturbed by {rtol:g}, seed {seed}{off})"
            )
            sys.stdout.flush()
            if subprocess.run(command, cwd=ROOT, env=env, check=False).returncode != 0:
                failed.append((seed, disable))
    for seed, disable in failed:
        off = f' --disable "{disable}"' if disable else ""
        print(
            f"\nAn output above changed when the random draws moved by {rtol:g} of themselves "
            f"(seed {seed}{off}): its shown digits hang on round-off, so another processor "
            "prints other ones. Fix it at its source (CONTRIBUTING.md, 'Outputs that do not "
            "depend on the processor'). Both values of each output that changed:\n"
            f"  .venv/bin/python scripts/fragility.py diff --seed {seed}{off} {named}"
        )
    return not failed


# ---------------------------------------------------------------------------
# Every difference, with both values (for diagnosis)
# ---------------------------------------------------------------------------

_EXPLORER_DATA = re.compile(
    r'<script type="application/json" class="explorer-data">(.*?)</script>', re.S
)


def sanitize_patterns() -> list[tuple[re.Pattern, str]]:
    """The regexes of tests/nbval_sanitize.cfg, in order (what nbval applies)."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / "tests" / "nbval_sanitize.cfg")
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


def _sanitized(text: str, patterns: list[tuple[re.Pattern, str]]) -> str:
    for regex, replace in patterns:
        text = regex.sub(replace, text)
    return text


def _explorer(html: str) -> dict | None:
    match = _EXPLORER_DATA.search(html)
    if not match:
        return None
    return json.loads(match.group(1))  # (its "<", ">" and "&" are JSON escapes)


def compare_outputs(stored: list[dict], got: list[dict]) -> list[str]:
    """What differs between two lists of a cell's outputs, as nbval compares them
    (sanitized text and HTML; figures as pictures), each difference with both values."""
    sys.path.insert(0, str(ROOT))
    from tests.png_compare import same_picture

    patterns = sanitize_patterns()
    skip = {"application/vnd.jupyter.widget-view+json"}

    def flat(outputs: list[dict]) -> dict[str, list[str]]:
        by_key: dict[str, list[str]] = {}
        for output in outputs:
            if output.get("output_type") == "stream":
                key = f"stream {output.get('name')}"
                by_key.setdefault(key, [""])[0] += _joined(output.get("text", ""))
            elif output.get("output_type") == "error":
                by_key.setdefault("error", []).append(output.get("ename", ""))
            glued = output.get("metadata", {}).get("scrapbook", {}).get("name")
            for mime, value in output.get("data", {}).items():
                if mime not in skip:  # a glued value is named: "glue jac_rank_bad"
                    key = f"glue {glued}" if glued else mime
                    by_key.setdefault(key, []).append(_joined(value))
        return by_key

    a, b = flat(stored), flat(got)
    found = []
    for key in sorted(set(a) | set(b)):
        if len(a.get(key, [])) != len(b.get(key, [])):
            found.append(f"{key}: {len(a.get(key, []))} stored, {len(b.get(key, []))} now")
            continue
        for x, y in zip(a[key], b[key], strict=True):
            if key == "image/png":
                if not same_picture(x, y):
                    found.append(f"image/png: {_picture_change(x, y)}")
                continue
            sx, sy = _sanitized(x, patterns), _sanitized(y, patterns)
            if sx == sy:
                continue
            ex, ey = (_explorer(x), _explorer(y)) if key == "text/html" else (None, None)
            if ex and ey:
                found += _explorer_differences(ex, ey, patterns)
                continue
            lines_x, lines_y = sx.splitlines(), sy.splitlines()
            raw_x, raw_y = x.splitlines(), y.splitlines()  # (the sanitizers keep lines)
            for k, (lx, ly) in enumerate(zip(lines_x, lines_y, strict=False)):
                if lx != ly:  # shown unsanitized: "min 6.7e-36" and "min 0", not ROUNDOFF
                    lx, ly = raw_x[k], raw_y[k]
                    found.append(
                        f"{key}, line {k + 1}:\n    stored: {lx[:300]}\n    now:    {ly[:300]}"
                    )
            if len(lines_x) != len(lines_y):
                found.append(f"{key}: {len(lines_x)} lines stored, {len(lines_y)} now")
    return found


def _explorer_differences(ex: dict, ey: dict, patterns) -> list[str]:
    found = []
    for k, (ax, ay) in enumerate(zip(ex["alt"], ey["alt"], strict=False)):
        if _sanitized(ax, patterns) != _sanitized(ay, patterns):
            found.append(f"explorer frame {k}, caption:\n    stored: {ax}\n    now:    {ay}")
    if ex["index"] != ey["index"] or len(ex["frames"]) != len(ey["frames"]):
        found.append(f"explorer: frames {ex['index']} stored, {ey['index']} now")
        return found
    for k, (fx, fy) in enumerate(zip(ex["frames"], ey["frames"], strict=True)):
        if fx != fy:
            px, py = fx.split(",", 1)[1], fy.split(",", 1)[1]
            found.append(f"explorer picture {k}: other bytes, {_picture_change(px, py)}")
    if not found:
        found.append("explorer: other markup")
    return found


def _picture_change(a: str, b: str) -> str:
    """How two base64 PNGs differ: the largest change of a pixel and how many changed."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tests.png_compare import LEVELS, _pixels

    pa, pb = _pixels(a), _pixels(b)
    if pa is None or pb is None or pa.shape != pb.shape:
        return "a picture of another size"
    change = np.abs(pa - pb).max(axis=-1)
    verdict = "the same picture" if change.max() <= LEVELS else "a different picture"
    return (
        f"{verdict}: {int((change > 0).sum())} pixels changed, by at most {int(change.max())} "
        f"of 255 ({int((change > LEVELS).sum())} by more than {LEVELS})"
    )


def run_diff(notebooks: list[str], seed: int | None, disable: str = "") -> int:
    """Execute each notebook (in the perturbed kernel if `seed` is given) and print every
    output that differs from the stored one; return how many cells differ."""
    before = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory() as jupyter_path:
        kernel_name = "python3"
        if seed is not None:
            kernel_name = kernel_spec_dir(Path(jupyter_path), seed, RTOL, disable)
            os.environ["JUPYTER_PATH"] = os.pathsep.join([jupyter_path, *filter(None, [before])])
        try:
            differing = _diff_each(notebooks, kernel_name)
        finally:  # (run_diff may run inside another program: a test)
            if before is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = before
    print(f"{differing} cells differ")
    return differing


def _diff_each(notebooks: list[str], kernel_name: str) -> int:
    import nbformat
    from nbclient import NotebookClient

    differing = 0
    for path in notebooks:
        stored = nbformat.read(path, as_version=4)
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as cwd:
            NotebookClient(
                nb,
                timeout=600,
                kernel_name=kernel_name,
                allow_errors=True,
                resources={"metadata": {"path": cwd}},
            ).execute()
        code = [c for c in stored.cells if c.cell_type == "code"]
        now = [c for c in nb.cells if c.cell_type == "code"]
        for k, (a, b) in enumerate(zip(code, now, strict=True)):
            if "nbval-ignore-output" in a.metadata.get("tags", []):
                continue
            found = compare_outputs(a.get("outputs", []), b.get("outputs", []))
            if found:
                differing += 1
                print(f"{Path(path).name} cell {k}:")
                for line in found:
                    print("  " + line)
        sys.stdout.flush()
    return differing


def main(argv: list[str]) -> int:
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # as scripts/run_tests.py: two processes, two cores
    if argv[:1] == ["kernel"]:
        kernel(argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    zeros = sub.add_parser("negative-zeros", help="stored outputs printing a negative zero")
    zeros.add_argument("notebooks", nargs="*")
    pert = sub.add_parser("perturbed", help="strict nbval with perturbed random draws")
    pert.add_argument("--seed", type=int, action="append", dest="seeds")
    pert.add_argument("--disable", default="", help="NumPy CPU features to turn off")
    pert.add_argument("--rtol", type=float, default=RTOL)
    pert.add_argument("-n", "--workers", type=int, default=2)
    pert.add_argument("notebooks", nargs="*")
    diff = sub.add_parser("diff", help="execute notebooks, print every output that differs")
    diff.add_argument("--seed", type=int, help="perturb the random draws with this seed")
    diff.add_argument("--disable", default="", help="NumPy CPU features to turn off")
    diff.add_argument("notebooks", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "diff":
        return 1 if run_diff(args.notebooks, args.seed, args.disable) else 0
    if args.command == "negative-zeros":
        paths = args.notebooks or sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
        found = [f for p in paths for f in negative_zeros(Path(p))]
        for f in found:
            print(f)
        print(f"{len(found)} negative zeros in the stored outputs of {len(paths)} notebooks")
        return 1 if found else 0
    runs = tuple((seed, args.disable) for seed in args.seeds) if args.seeds else RUNS
    ok = run_perturbed(args.notebooks, runs, args.rtol, args.workers)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
