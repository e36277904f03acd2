"""Checks of the repository's own consistency: chapters, the install cell, glue, and no
reference to a path outside the repository."""

from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import PurePosixPath

import nbformat
import pytest
import yaml

from tests.notebook_bootstrap import ROOT, bootstrap_source, install_spec, repository

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebooks found"


def test_every_chapter_is_in_the_toc_and_named_in_order():
    toc = (ROOT / "_toc.yml").read_text()
    for path in NOTEBOOKS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), path.name
        assert f"notebooks/{path.stem}" in toc, f"{path.name} is not in _toc.yml"


def test_repository_is_configured_once():
    url, branch = repository()
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url)
    assert branch
    assert install_spec().endswith(f"git+{url}@{branch}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_installs_helpers_in_colab_only(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = code[0]
    assert first.source == bootstrap_source(), (
        f"{path.name}: the first code cell must be the Colab install cell of "
        "tests/notebook_bootstrap.py (it names the repository of _config.yml); "
        "run scripts/set_install_cells.py"
    )
    assert first.outputs == [], "outside Colab the install cell must print nothing"
    assert "remove-cell" in first.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_self_contained_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata, (
        "widget state must not be stored (see execute_notebooks.py)"
    )
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for pattern in (r"sys\.path", r"os\.chdir", r"\bopen\(", r"savefig", r"from myst_nb"):
        assert not re.search(pattern, code), f"{path.name} uses {pattern}"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is not None, f"{path.name} has an unexecuted cell"
            for output in cell.outputs:
                assert output.output_type != "error", f"{path.name} stored an error"
                assert output.get("name") != "stderr", f"{path.name} stored stderr: {output}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_glued_name_in_the_text_is_stored(path):
    nb = nbformat.read(path, as_version=4)
    stored = {
        o.metadata["scrapbook"]["name"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "scrapbook" in o.get("metadata", {})
    }
    used = {
        m.split(":")[0]
        for c in nb.cells
        if c.cell_type == "markdown"
        for m in re.findall(r"\{glue(?::\w+)?\}`([^`]+)`", c.source)
    }
    assert used <= stored, f"glued in the text but never stored: {sorted(used - stored)}"


def test_helpers_glue_writes_what_myst_nb_glue_writes():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from myst_nb import glue as myst_glue

    from helpers import glue

    InteractiveShell.instance()
    for display in (False, True):
        with capture_output() as ours:
            glue("x", "0.4011", display=display)
        with capture_output() as theirs:
            myst_glue("x", "0.4011", display=display)
        assert [(o.data, o.metadata) for o in ours.outputs] == [
            (o.data, o.metadata) for o in theirs.outputs
        ]
        assert ours.outputs, "nothing was displayed"


def test_toc_and_bibliography_files_exist():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    for f in files:
        assert (ROOT / f"{f}.md").exists() or (ROOT / f"{f}.ipynb").exists(), f
    assert (ROOT / "book" / "references.bib").exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_maths_needs_no_site_macros(path):
    """The site defines MathJax macros (\\softmax, ...) for the book's pages, but Jupyter
    and Colab do not know them: a chapter's formulas must be plain LaTeX to render there."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    macros = config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    pattern = re.compile(r"\\(" + "|".join(macros) + r")(?![A-Za-z])")
    nb = nbformat.read(path, as_version=4)
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    texts += [c.metadata.get("mystnb", {}).get("figure", {}).get("caption", "") for c in nb.cells]
    used = {m for text in texts for m in pattern.findall(text)}
    assert not used, f"{path.name} uses site-only macros {sorted(used)}"


def labelled_headings(text: str) -> list[tuple[str, str]]:
    """(label, heading) for every heading that directly follows a ``(label)=`` target."""
    return re.findall(r"^\(([\w-]+)\)=\s*\n(#+ .*)$", text, flags=re.MULTILINE)


def test_labelled_headings_hold_no_maths():
    """A {ref} to a section shows its title as plain text: maths there is raw TeX on the
    site (the link "Why the scores are divided by \\sqrt{d_k}"). Labelled headings, the
    ones {ref} can link to, must be free of $...$ (use words or Unicode: τ, √d_k)."""
    sources = {
        **{
            p.name: "\n\n".join(c.source for c in nbformat.read(p, as_version=4).cells)
            for p in NOTEBOOKS
        },
        **{p.name: p.read_text() for p in (ROOT / "book").glob("*.md")},
    }
    found = [
        (name, label, heading)
        for name, text in sources.items()
        for label, heading in labelled_headings(text)
        if "$" in heading or "\\" in heading
    ]
    assert labelled_headings("(sec-x)=\n## A title\n")  # the pattern finds headings
    assert not found, f"labelled headings with maths (raw TeX in every link to them): {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_has_a_caption_a_name_and_alternative_text(path):
    """A figure is a code cell whose output is a PNG. Its cell metadata gives myst-nb the
    caption and the name (mystnb.figure) and the image's alt text (mystnb.image.alt),
    which says what the figure shows, in words a screen reader can read out."""
    nb = nbformat.read(path, as_version=4)
    figures = [
        c
        for c in nb.cells
        if c.cell_type == "code" and any("image/png" in o.get("data", {}) for o in c.outputs)
    ]
    assert figures, f"{path.name} has no figure"
    for cell in figures:
        meta = cell.metadata.get("mystnb", {})
        figure, alt = meta.get("figure", {}), meta.get("image", {}).get("alt", "")
        where = f"{path.name}, figure {figure.get('name', cell.source[:60])!r}"
        assert figure.get("caption") and figure.get("name"), f"{where}: caption or name missing"
        assert len(alt.split()) >= 8, f"{where}: mystnb.image.alt must say what it shows: {alt!r}"
        assert not re.search(r"[$\\]", alt), f"{where}: alt text is read as is, no TeX: {alt!r}"


# A path that leaves the repository: a relative path that climbs out of it from the file's
# own folder, the folder the book was written beside, or the workspace it was written in.
# A clone has none of them. (The patterns are spelt so that this file does not match them.)
_CLIMB = re.compile(r"(?<![\w.])(?:\.\./)+[\w.-][\w./-]*")
_OUTSIDE = re.compile(r"(?<![\w./-])(?:shared|/work)" + "/" + r"[\w./-]*")
_TEXT_SUFFIXES = {".md", ".py", ".ipynb", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".json"}
_TEXT_SUFFIXES |= {".bib", ".js", ".cjs", ".css", ".html", ".sh", ""}


def outside_references(path: str, text: str) -> list[str]:
    """The paths in `text` (the content of the repository file `path`, relative to the
    root) that point outside the repository."""
    folder = PurePosixPath(path).parent
    found = []
    for match in _CLIMB.finditer(text):
        target = posixpath.normpath(str(folder / match.group(0)))
        if target == ".." or target.startswith("../"):
            found.append(match.group(0))
    found += [m.group(0) for m in _OUTSIDE.finditer(text)]
    return found


def tracked_files() -> list[str]:
    """The repository's files as git tracks them (all files, outside .git, without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "node_modules", "_build"}
        return [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
        ]
    return [name for name in listed.split("\0") if name]


def test_the_outside_path_finder_finds_what_it_must():
    climb = "../" + "shared" + "/STYLE.md"  # written in two parts, so this file has none
    assert outside_references("README.md", f"following `{climb}`") == [climb]
    assert outside_references("docs/a.md", "see ../" + "../x.md") == ["../" + "../x.md"]
    assert outside_references("README.md", "in " + "/work" + "/shared/source/") != []
    assert outside_references("README.md", "the " + "shared" + "/ folder") != []
    # inside the repository: a sibling folder, a chapter linking to the front matter
    assert outside_references("notebooks/01_softmax.ipynb", "{doc}`../book/notation`") == []
    assert outside_references("binder/requirements.txt", "-r ../requirements.txt") == []
    assert outside_references("a.py", "helpers/checks/core.py and x.y/shared/z") == []


def test_no_file_refers_to_a_path_outside_the_repository():
    files = [f for f in tracked_files() if PurePosixPath(f).suffix in _TEXT_SUFFIXES]
    assert "README.md" in files and "CONTRIBUTING.md" in files
    found = {}
    for name in files:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if hits := outside_references(name, text):
            found[name] = sorted(set(hits))
    assert not found, f"paths outside the repository (a clone does not have them): {found}"


def test_jsonschema_does_not_build_iri_grammars_at_import():
    """`make` removes rfc3987-syntax (the Makefile's NO_RFC3987): with it installed, every
    process that imports nbformat spends 2.7 s of CPU building grammars nothing here uses."""
    import importlib.util

    assert importlib.util.find_spec("rfc3987_syntax") is None, (
        "rfc3987-syntax is installed again: run `make` (its NO_RFC3987 step), or remove it"
    )
