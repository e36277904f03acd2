"""The Colab install cell every chapter starts with, derived from _config.yml.

The repository URL is configured once, in _config.yml. The install cell of each chapter
has to contain it literally (the cell runs before anything is installed), so the tests
check every chapter's first code cell against the text produced here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "attention-book-helpers"


def repository() -> tuple[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["repository"]["url"].rstrip("/"), config["repository"]["branch"]


def install_spec(url: str | None = None, ref: str | None = None) -> str:
    """The pip requirement the install cell uses (optionally for another URL or ref)."""
    default_url, default_ref = repository()
    return f"{DISTRIBUTION} @ git+{url or default_url}@{ref or default_ref}"


def bootstrap_source() -> str:
    """The exact source of a chapter's first code cell."""
    return f'''# In Colab, install this book's `helpers` package; elsewhere this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "{install_spec()}",
        ],
        check=True,
    )'''
