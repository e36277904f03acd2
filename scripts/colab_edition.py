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

# What the editions are made from (the colab builder reads the whole book; the pins of
# Sphinx, myst-nb and Jupyter Book are in requirements.txt; the Korean ones also read the
# catalogues and their scripts), and the record of the last generation: each input's and
# each edition file's SHA-256 (`record_digest`), which `make test` compares with the files
# as they are (`digest_differences`) instead of building the editions again; the weekly
# `make test-full` builds them again and compares.
INPUTS = (
    "notebooks",
    "book",
    "_config.yml",
    "_toc.yml",
    "requirements.txt",
    "scripts/colab_edition.py",
    "scripts/student_edition.py",
    "tests/notebook_bootstrap.py",
)
KO_INPUTS = (*INPUTS, "locales/ko", "scripts/ko_edition.py", "scripts/code_i18n.py")
DIGEST = ROOT / "editions" / "digest.json"
KO_DIGEST = ROOT / "editions" / "ko" / "digest.json"
# language: (inputs, the editions' folders, the digest)
EDITIONS = {
    "en": (INPUTS, ("editions/colab", "editions/student"), DIGEST),
    "ko": (KO_INPUTS, ("editions/ko/colab", "editions/ko/student", "editions/ko/glue"), KO_DIGEST),
}


def _tracked(paths: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """The files git tracks under `paths` (not caches or a build's leftovers)."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--", *paths],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(f for f in listed.split("\0") if f and (root / f).is_file())


def current_digest(root: Path = ROOT, language: str = "en") -> dict[str, dict[str, str]]:
    """{"inputs": {path: sha256}, "editions": {path: sha256}} of the files as they are."""
    import hashlib

    inputs, folders, _ = EDITIONS[language]

    def sha(rel: str) -> str:
        return hashlib.sha256((root / rel).read_bytes()).hexdigest()

    editions = sorted(
        p.relative_to(root).as_posix()
        for folder in folders
        for p in (root / folder).glob("*")
        if p.suffix in (".ipynb", ".json")
    )
    return {
        "inputs": {rel: sha(rel) for rel in _tracked(inputs, root)},
        "editions": {rel: sha(rel) for rel in editions},
    }


def record_digest(language: str = "en") -> None:
    import json

    digest = EDITIONS[language][2]
    digest.write_text(json.dumps(current_digest(ROOT, language), indent=1, sort_keys=True) + "\n")


def digest_differences(root: Path = ROOT, language: str = "en") -> list[str]:
    """What changed since the editions were last generated (`make edition`), one line per
    file: an input (a chapter, a page, a catalogue, the builder) or an edition file edited
    by hand."""
    import json

    digest = root / EDITIONS[language][2].relative_to(ROOT)
    if not digest.exists():
        return [f"{digest.relative_to(root)} is missing"]
    recorded, now = json.loads(digest.read_text()), current_digest(root, language)
    lines = []
    for part in ("inputs", "editions"):
        before, after = recorded.get(part, {}), now[part]
        for rel in sorted(set(before) | set(after)):
            if before.get(rel) != after.get(rel):
                what = "new" if rel not in before else "gone" if rel not in after else "changed"
                lines.append(f"{part[:-1]} {what} since `{COMMAND}`: {rel}")
    return lines


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
    if colab == EDITION:
        record_digest()
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
