"""Project-wide pytest configuration.

nbval compares the text and HTML outputs of every notebook cell but, by default, skips
PNG images. The book renders the stored outputs (it never executes notebooks), so a
stale figure would reach readers unnoticed. Here the notebook items also compare PNG
outputs: Matplotlib's Agg renderer is deterministic for pinned versions, so a figure
that differs after re-execution is a figure the current code no longer draws.
"""

from __future__ import annotations


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        parent = getattr(item, "parent", None)
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and "image/png" in skip:
            parent.skip_compare = tuple(key for key in skip if key != "image/png")
