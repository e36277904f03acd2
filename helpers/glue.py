"""Glue computed values into the book's prose (used by every chapter).

The chapters quote numbers in their text with myst-nb's ``{glue}`` role. The
role reads values that a code cell stored in its outputs. myst-nb provides
``myst_nb.glue`` to store them, but importing it in a notebook would make every
chapter depend on the book's build tools, which Colab does not have. This
module writes exactly the same output (the "scrapbook" display protocol that
myst-nb reads), with only IPython, which every Jupyter kernel has.

Only a run that nobody watches stores the values: the book's own runs
(scripts/execute_notebooks.py, which stores the outputs the site reads, and
strict nbval, which compares them), like every unattended runner (nbclient,
papermill), tell the kernel that they cannot answer ``input()``. A reader's
JupyterLab, Jupyter Notebook, VS Code or Colab can, and there ``glue`` shows
nothing: the value is for the site, which has already substituted it into the
text the reader is reading, and JupyterLab cannot show it, so an output holding
it would only draw an empty band under the glue cell.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["glue"]

GLUE_PREFIX = "application/papermill.record/"


def _reader_runs_this_cell() -> bool:
    """Whether a person runs the current cell in a notebook (Jupyter, Colab).

    True in Colab, or in a kernel whose current request came from a frontend that
    can answer ``input()`` (the Jupyter messaging protocol's ``allow_stdin``, which
    nbclient and nbval send as false). False anywhere else (plain IPython, no kernel).
    """
    if "google.colab" in sys.modules:
        return True
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    try:
        request = kernel.get_parent()  # (ipykernel 6 and later)
    except AttributeError:
        return False
    return bool((request or {}).get("content", {}).get("allow_stdin"))


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` so the prose can quote it.

    Parameters
    ----------
    name : str
        The key used in the text, as in ``{glue}`name```. Unique per notebook.
    value : object
        What to store. Its display representation is stored, so format numbers
        first (``f"{x:.4f}"``): the text shows the string exactly.
    display : bool, default False
        Also show the value in the notebook, as myst-nb's ``glue`` does.

    Notes
    -----
    Equivalent to ``myst_nb.glue(name, value, display)``; a test checks that
    both write the same output. Run by a reader in Jupyter or Colab (see the
    module's docstring), it stores nothing and shows only what ``display=True``
    asks for, so the glue cell keeps no output and no empty band under it.

    Examples
    --------
    Outside a Jupyter kernel the value is only formatted, never shown:

    >>> glue("answer", f"{6 * 7:d}")
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"glue: name must be a non-empty str, got {name!r}")
    from IPython.core.formatters import format_display_data
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display as ipy_display

    if not InteractiveShell.initialized():
        return  # plain Python: there is no notebook to store the value in
    if not display and _reader_runs_this_cell():
        return  # a reader's notebook: nothing for the site to read, and nothing to show

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
