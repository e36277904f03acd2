"""When two PNG outputs of a notebook show the same picture.

Strict nbval compares every output of every cell with the stored one, figures included
(see the root ``conftest.py``). Comparing a figure's bytes is too strict across
processors: NumPy and OpenBLAS take different vectorised code paths on different CPUs
(AVX-512 or AVX2, for example), so a plotted value can differ in its last bit, and
Matplotlib's anti-aliasing then shades a pixel on a line's edge one level lighter.
Nothing a reader can see has changed.

Two PNGs show the same picture when they have the same size and no pixel differs by
more than :data:`LEVELS` of 255 in any channel. A last-bit change moves a line's edge
by far less than 1/100 of a pixel, which changes a pixel by a level or two; anything a
reader can see (a line moved by a tenth of a pixel, a different label, a colour) changes
some pixel by tens of levels. ``tests/test_repository.py`` checks both sides of this.
"""

from __future__ import annotations

import base64
import binascii
import io

import numpy as np
from PIL import Image

__all__ = ["LEVELS", "same_picture"]

LEVELS = 8


def _pixels(png: str | bytes) -> np.ndarray | None:
    try:
        raw = base64.b64decode(png) if isinstance(png, str) else png
        with Image.open(io.BytesIO(raw)) as image:
            return np.asarray(image.convert("RGBA"), dtype=np.int16)
    except (binascii.Error, OSError, ValueError):
        return None


def same_picture(a: str | bytes, b: str | bytes, levels: int = LEVELS) -> bool:
    """Whether PNGs ``a`` and ``b`` (bytes, or base64 text as notebooks store them) agree."""
    if a == b:
        return True
    pa, pb = _pixels(a), _pixels(b)
    if pa is None or pb is None or pa.shape != pb.shape:
        return False
    return int(np.abs(pa - pb).max()) <= levels
