"""Input checks shared by the helpers modules (private).

Every public function reports bad input with an error that names the argument and what
was wrong; these are the checks more than one module needs.
"""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt


def as_integer(value: object, name: str, *, minimum: int = 0) -> int:
    """``value`` as a Python int ``>= minimum``; TypeError/ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        k = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if k < minimum:
        kind = {0: ">= 0", 1: "positive"}.get(minimum, f">= {minimum}")
        raise ValueError(f"{name} must be {kind}, got {k}")
    return k


def as_real_array(x: npt.ArrayLike, name: str, *, bool_hint: str) -> np.ndarray:
    """``x`` as an array of a real dtype: floats as they are, integers as float64.

    bool, complex, string and object arrays raise TypeError naming ``name``; for bool the
    message ends with ``bool_hint`` (a boolean array is usually a mask passed by mistake).
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be an array of real numbers; converting it failed: {err}"
        ) from err
    kind = arr.dtype.kind
    if kind == "f":
        return arr
    if kind in "iu":
        return arr.astype(np.float64)
    if kind == "b":
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype bool; a boolean array "
            f"is usually a mask{bool_hint}"
        )
    raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
