"""Rewrite every chapter's first code cell (the Colab install cell) from _config.yml.

Run after changing `repository` in _config.yml: the install cell must name the repository
literally (it runs before anything is installed), and tests/test_repository.py checks it.
Then run `make edition`: the Colab edition copies the install cells, and the Korean
editions' install cell is this one followed by ``helpers.set_language("ko")``
(scripts/ko_edition.py, ``install_source``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.notebook_bootstrap (this script is not a notebook)

from tests.notebook_bootstrap import bootstrap_source  # noqa: E402


def main() -> int:
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code")
        if cell.source != bootstrap_source():
            cell.source = bootstrap_source()
            nbformat.write(nb, path)
            print(f"{path.name}: install cell updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
