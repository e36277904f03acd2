"""Project-wide pytest configuration.

Hypothesis runs derandomized (the same examples on every run) so that `make test` gives
the same verdict every time; set HYPOTHESIS_PROFILE=explore to search with fresh random
examples (and more of them) while developing.

nbval compares the text and HTML outputs of every notebook cell but, by default, skips
PNG images. The book renders the stored outputs (it never executes notebooks), so a
stale figure would reach readers unnoticed. Here the notebook items also compare PNG
outputs: a figure that differs after re-execution is a figure the current code no longer
draws. Figures are compared as pictures, not as bytes (``tests/png_compare.py``): a
last-bit difference between processors may shade a pixel on a line's edge a level
differently, which no reader can see; any visible change still fails.
"""

from __future__ import annotations

import copy
import os

from hypothesis import settings

settings.register_profile("book", derandomize=True, database=None)
settings.register_profile("explore", max_examples=1000, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))

PNG = "image/png"


def _accept_same_pictures(test: list, ref: list) -> list:
    """``test`` with each PNG replaced by the stored one where both show the same picture."""
    from tests.png_compare import same_picture

    ref_pngs = [o["data"][PNG] for o in ref if PNG in o.get("data", {})]
    test = copy.deepcopy(test)
    shown = [o for o in test if PNG in o.get("data", {})]
    for output, stored in zip(shown, ref_pngs, strict=False):
        if output["data"][PNG] != stored and same_picture(output["data"][PNG], stored):
            output["data"][PNG] = stored
    return test


def pytest_configure(config):
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval is a test dependency; plain pytest runs need nothing here
        return
    if getattr(IPyNbCell.compare_outputs, "_book_pictures", False):
        return
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        return original(self, _accept_same_pictures(test, ref), ref, skip_compare)

    compare_outputs._book_pictures = True
    IPyNbCell.compare_outputs = compare_outputs


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        parent = getattr(item, "parent", None)
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and PNG in skip:
            parent.skip_compare = tuple(key for key in skip if key != PNG)
