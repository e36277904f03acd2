"""Build the book's HTML (used by `make book`; `--student` builds the student edition).

Runs Jupyter Book with warnings as errors and nitpicky references, then serves MathJax 3
from the site itself: the npm package `mathjax` (installed into node_modules by
`make book`) is copied into _static/mathjax, where `mathjax_path` in _config.yml points.
A student who downloads the built site therefore sees typeset formulas with no network.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"


def copy_mathjax(html: Path) -> None:
    """Copy MathJax into html/_static/mathjax unless that version is already there."""
    version = json.loads((MATHJAX.parent / "package.json").read_text())["version"]
    target = html / "_static" / "mathjax"
    stamp = target / ".version"
    if stamp.exists() and stamp.read_text() == version:
        return
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        sys.exit("MathJax is missing from node_modules: run `npm ci` (make book does)")
    shutil.rmtree(target, ignore_errors=True)
    # The speech-rule engine (sre) is only loaded on request; leave it out to halve the size.
    shutil.copytree(MATHJAX, target, ignore=shutil.ignore_patterns("sre", "*.map"))
    stamp.write_text(version)


def build(student: bool) -> Path:
    args = ["jupyter-book", "build", str(ROOT), "--builder", "html", "-W", "-n", "--keep-going"]
    out = ROOT / "_build"
    if student:
        config = yaml.safe_load((ROOT / "_config.yml").read_text())
        config["title"] += " (student edition)"
        config["sphinx"]["config"]["hide_solutions"] = True
        out = ROOT / "_build" / "student"
        tmp = tempfile.NamedTemporaryFile("w", suffix=".yml", dir=ROOT, delete=False)
        with tmp:
            yaml.safe_dump(config, tmp, allow_unicode=True, sort_keys=False)
        args += ["--config", tmp.name, "--path-output", str(out)]
    try:
        subprocess.run([str(Path(sys.executable).parent / args[0]), *args[1:]], check=True)
    finally:
        if student:
            Path(tmp.name).unlink()
    html = out / "html"
    copy_mathjax(html)
    return html


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true", help="build without solutions")
    html = build(parser.parse_args().student)
    print(f"HTML: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
