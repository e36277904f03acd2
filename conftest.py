"""Project-wide pytest configuration.

Hypothesis runs derandomized (the same examples on every run) so that `make test` gives
the same verdict every time; set HYPOTHESIS_PROFILE=explore to search with fresh random
examples (and more of them) while developing.

nbval compares the text and HTML outputs of every notebook cell but, by default, skips
PNG images. The book renders the stored outputs (it never executes notebooks), so a
stale figure would reach readers unnoticed. Here the notebook items also compare PNG
outputs: Matplotlib's Agg renderer is deterministic for pinned versions, so a figure
that differs after re-execution is a figure the current code no longer draws.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("book", derandomize=True, database=None)
settings.register_profile("explore", max_examples=1000, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        parent = getattr(item, "parent", None)
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and "image/png" in skip:
            parent.skip_compare = tuple(key for key in skip if key != "image/png")
