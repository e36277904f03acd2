"""Glue computed values into the book's prose (used by every chapter).

The chapters quote numbers in their text with myst-nb's ``{glue}`` role. The
role reads values that a code cell stored in its outputs. myst-nb provides
``myst_nb.glue`` to store them, but importing it in a notebook would make every
chapter depend on the book's build tools, which Colab does not have. This
module writes exactly the same output (the "scrapbook" display protocol that
myst-nb reads), with only IPython, which every Jupyter kernel has.
"""

from __future__ import annotations

from typing import Any

__all__ = ["glue"]

GLUE_PREFIX = "application/papermill.record/"


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
    both write the same output.

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

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
