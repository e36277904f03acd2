"""Generate the Colab and student editions: editions/{colab,student}/NN_topic.ipynb.

Usage: python scripts/colab_edition.py           write both editions (`make edition`),
                                                 in English and in Korean
       python scripts/colab_edition.py --check   exit 1 if any edition is stale
       python scripts/colab_edition.py --only en (or ko): one language's editions

The Colab and Binder buttons of every chapter open these notebooks. They are generated
from the chapters (the single source) by the `colab` Sphinx builder of
book/_ext/colab_edition.py, in a fresh full build in a temporary directory, so a change in
any chapter (a section title another chapter links to, a renumbered theorem) reaches all
of them. The student edition (editions/student/, the notebooks the student edition of the
site opens) is derived from the fresh Colab edition by scripts/student_edition.py: every
solution replaced by starting cells. `make execute` runs this after executing notebooks;
tests/test_colab_edition.py fails when either committed edition differs from a fresh one.

The Korean editions, editions/ko/{colab,student}/, are made the same way from Korean
notebooks that scripts/ko_edition.py makes from the chapters and their catalogues
(locales/ko/LC_MESSAGES/notebooks/): this script runs it after the English editions.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EDITION = ROOT / "editions" / "colab"
COMMAND = "make edition"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import student_edition  # noqa: E402


def generate(out: Path, root: Path = ROOT) -> dict[str, bytes]:
    """Build the edition of the book in `root` (the Korean one: scripts/ko_edition.py
    stages it) into `out`; return {file name: bytes} of the chapter notebooks."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    args = [str(jupyter_book), "build", str(root), "--builder", "custom"]
    args += ["--custom-builder", "colab", "-W", "-n", "--keep-going", "--path-output", str(out)]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        # Jupyter Book prints its own box and a traceback; the cause is on these lines.
        log = (result.stdout + result.stderr).splitlines()
        cause = [line for line in log if re.search(r"WARNING|ERROR|Error:|Exception", line)]
        sys.stderr.write("\n".join(cause or log[-40:]) + "\n")
        raise SystemExit("the Colab edition could not be built (the error is above)")
    built = out / "_build" / "colab" / "notebooks"
    return {p.name: p.read_bytes() for p in sorted(built.glob("[0-9][0-9]_*.ipynb"))}


def differences(fresh: dict[str, bytes], directory: Path = EDITION) -> list[str]:
    """What differs between a fresh edition and `directory`, one line per file."""
    committed = {p.name: p.read_bytes() for p in sorted(directory.glob("*.ipynb"))}
    lines = [f"missing: {directory.name}/{n}" for n in sorted(set(fresh) - set(committed))]
    lines += [f"not a chapter: {directory.name}/{n}" for n in sorted(set(committed) - set(fresh))]
    lines += [
        f"stale: {directory.name}/{n}"
        for n in sorted(set(fresh) & set(committed))
        if fresh[n] != committed[n]
    ]
    return lines


def stale(
    fresh: dict[str, bytes],
    colab: Path = EDITION,
    student_directory: Path = student_edition.EDITION,
) -> list[str]:
    """What differs between both committed editions and fresh ones (from `fresh`, a fresh
    Colab edition), one line per file."""
    student = student_edition.generate(fresh)
    return differences(fresh, colab) + differences(student, student_directory)


def finish(fresh: dict[str, bytes], colab: Path, student_directory: Path, check: bool) -> int:
    """Write a fresh Colab edition and its student edition into `colab` and
    `student_directory`, or with `check` only say whether the committed ones are stale."""
    if not fresh:
        raise SystemExit("no chapter notebooks were converted")
    student = student_edition.generate(fresh)  # before writing: a failure writes nothing
    where = f"{colab.relative_to(ROOT)}/ and {student_directory.relative_to(ROOT)}/"
    if check:
        diff = stale(fresh, colab, student_directory)
        if diff:
            print("\n".join(diff))
            print(f"The Colab or student edition is stale: run `{COMMAND}` and commit {where}.")
            return 1
        print(f"{where} are current ({len(fresh)} chapters)")
        return 0
    student_edition.write(fresh, colab)
    student_edition.write(student, student_directory)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale edition")
    parser.add_argument(
        "--only", choices=("en", "ko"), help="one language's editions (default: both)"
    )
    args = parser.parse_args(argv)
    status = 0
    if args.only != "ko":
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate(Path(tmp))
        status |= finish(fresh, EDITION, student_edition.EDITION, args.check)
    if args.only != "en":
        # The Korean editions (editions/ko/), from the same notebooks and the catalogues.
        import ko_edition

        status |= ko_edition.main(["--check"] if args.check else [])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
