"""Figures are compared as pictures: invisible last-bit changes pass, visible ones fail."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from tests.png_compare import same_picture


def figure(y, title="spread", shift=0.0):
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 10, 200)
    ax.semilogy(x, y)
    ax.set(title=title, ylim=(1e-3, 10), xlim=(0, 10))
    if shift:  # move the whole line by `shift` pixels upwards
        line = ax.get_lines()[0]
        line.set_transform(
            line.get_transform() + matplotlib.transforms.Affine2D().translate(0, shift)
        )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


Y = np.exp(-np.linspace(0, 6, 200)) * (1.5 + np.sin(np.linspace(0, 30, 200)))


def test_last_bit_changes_are_the_same_picture():
    reference = figure(Y)
    rng = np.random.default_rng(0)
    for _ in range(5):
        jitter = Y * (1 + 4e-16 * rng.standard_normal(Y.shape))  # a few ulps, as across CPUs
        assert same_picture(figure(jitter), reference)


def test_visible_changes_are_not():
    reference = figure(Y)
    assert not same_picture(figure(Y, shift=0.1), reference), "a line moved by 0.1 pixel"
    assert not same_picture(figure(Y, shift=0.05), reference), "even by 0.05 pixel"
    assert not same_picture(figure(Y * 1.01), reference), "data changed by 1%"
    assert not same_picture(figure(Y, title="spreads"), reference), "a label changed"
    damaged = figure(Y)
    assert not same_picture(damaged[: len(damaged) // 2], reference), "a truncated PNG"
    assert not same_picture(b"not a png", reference)
