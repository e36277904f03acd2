"""Tests of chapter 4's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import (
    check_alibi_slopes,
    check_rope,
    check_rope_layout_conversion,
    check_rope_layout_inverse,
    check_sinusoidal_encoding,
    check_sinusoidal_shift,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# From-scratch answers, as a reader would write them; keywords reproduce the slips
# ---------------------------------------------------------------------------


def reader_pe(n, d_model, *, layout="interleaved", exponent="2i/d", start=0):
    i = np.arange(d_model // 2)
    p = np.arange(start, start + n)[:, None]
    if exponent == "j/d":
        sin = np.sin(p / 10000 ** (2 * i / d_model))
        cos = np.cos(p / 10000 ** ((2 * i + 1) / d_model))
    else:
        power = {"2i/d": 2 * i / d_model, "i/d": i / d_model, "+2i/d": -2 * i / d_model}
        angle = p / 10000 ** power[exponent]
        sin, cos = np.sin(angle), np.cos(angle)
    if layout == "concatenated":
        return np.hstack([sin, cos])
    PE = np.zeros((n, d_model))
    first, second = (cos, sin) if layout == "cos first" else (sin, cos)
    PE[:, 0::2], PE[:, 1::2] = first, second
    return PE


def loop_pe(n, d_model):
    """The other common correct answer: the formula entry by entry."""
    PE = np.zeros((n, d_model))
    for p in range(n):
        for j in range(d_model):
            w = 1 / 10000 ** (2 * (j // 2) / d_model)
            PE[p, j] = np.sin(p * w) if j % 2 == 0 else np.cos(p * w)
    return PE


def fairseq_pe(n, d_model):
    """tensor2tensor / fairseq: concatenated, frequencies 10000^(-i/(d/2 - 1))."""
    half = d_model // 2
    w = np.exp(-np.log(10000) * np.arange(half) / max(half - 1, 1))
    angle = np.arange(n)[:, None] * w
    return np.hstack([np.sin(angle), np.cos(angle)])


def named(fn, **kwargs):
    def wrapped(*args):
        return fn(*args, **kwargs)

    wrapped.__name__ = "_".join([fn.__name__, *map(str, kwargs.values())])
    return wrapped


PE_CASES = [
    "n = 6, d_model = 8",
    "n = 50, d_model = 16",
    "a single pair, d_model = 2",
    "d_model = 128",
]
MULTI_PAIR = [c for c in PE_CASES if c != "a single pair, d_model = 2"]


def test_the_books_encoding_is_refused():
    assert_refused(
        check_sinusoidal_encoding(helpers.sinusoidal_encoding),
        "helpers.positional.sinusoidal_encoding",
    )


@pytest.mark.parametrize("fn", [reader_pe, loop_pe])
def test_correct_encodings_pass(fn):
    report = check_sinusoidal_encoding(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == PE_CASES


@pytest.mark.parametrize(
    ("fn", "cases", "problems", "hint"),
    [
        (
            named(reader_pe, layout="concatenated"),
            MULTI_PAIR,
            ["the sines and cosines are concatenated"],
            "PE[:, 0::2] = sin",
        ),
        (named(reader_pe, layout="cos first"), PE_CASES, ["sine and cosine are swapped"], ""),
        (named(reader_pe, exponent="i/d"), MULTI_PAIR, ["the factor 2 is missing"], ""),
        (named(reader_pe, exponent="j/d"), PE_CASES, ["uses the column index j"], "2 * (j // 2)"),
        (named(reader_pe, exponent="+2i/d"), MULTI_PAIR, ["the exponent has the wrong sign"], ""),
        (named(reader_pe, start=1), PE_CASES, ["the positions start at 1"], "np.arange(n)"),
        (
            fairseq_pe,
            MULTI_PAIR,
            ["the sines and cosines are concatenated", "tensor2tensor and fairseq"],
            "",
        ),
        (
            named(reader_pe, layout="concatenated", exponent="i/d"),
            MULTI_PAIR,
            ["the sines and cosines are concatenated", "the factor 2 is missing"],
            "",
        ),
        (
            named(reader_pe, layout="cos first", start=1),
            PE_CASES,
            ["sine and cosine are swapped", "the positions start at 1"],
            "",
        ),
    ],
)
def test_typical_encoding_slips_are_named(fn, cases, problems, hint):
    report = check_sinusoidal_encoding(fn)
    assert not report
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    for text in problems_by_case.values():
        for problem in problems:
            assert problem in text
    assert hint in flat(report)


def test_a_transposed_encoding_is_reported_by_shape():
    report = check_sinusoidal_encoding(lambda n, d: reader_pe(n, d).T)
    assert "expected shape (6, 8), got shape (8, 6)" in failed(report)["n = 6, d_model = 8"]


def test_an_encoding_that_fails_in_an_unknown_way_says_the_values_differ():
    report = check_sinusoidal_encoding(lambda n, d: reader_pe(n, d) * 1.5)
    assert all("values differ" in p for p in failed(report).values())


# ---------------------------------------------------------------------------
# check_sinusoidal_shift
# ---------------------------------------------------------------------------


def reader_shift(k, d_model, *, transposed=False, pairs="interleaved", angle="k"):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        w = 10000 ** (-2 * i / d_model)
        a = (k if angle == "k" else 1) * w
        block = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        if transposed:
            block = block.T
        idx = [2 * i, 2 * i + 1] if pairs == "interleaved" else [i, i + d_model // 2]
        R[np.ix_(idx, idx)] = block
    return R


SHIFT_CASES = [
    "k = 1, d_model = 4",
    "k = 5, d_model = 8",
    "a shift back, k = -3, d_model = 6",
    "no shift, k = 0",
    "a long shift, k = 250, d_model = 16",
]
MOVING = [c for c in SHIFT_CASES if c != "no shift, k = 0"]


def test_the_books_shift_is_refused_in_both_layouts():
    assert_refused(
        check_sinusoidal_shift(helpers.sinusoidal_shift), "helpers.positional.sinusoidal_shift"
    )

    def permuted(k, d_model):  # the statement of 4.2 asks for R' entry by entry instead
        order = np.r_[0:d_model:2, 1:d_model:2]
        return helpers.sinusoidal_shift(k, d_model)[np.ix_(order, order)]

    assert_refused(checks.check_concatenated_shift(permuted), "helpers.positional.sinusoidal_shift")


@pytest.mark.parametrize("fn", [reader_shift])
def test_correct_shift_matrices_pass(fn):
    report = check_sinusoidal_shift(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == SHIFT_CASES


@pytest.mark.parametrize(
    ("fn", "cases", "problems"),
    [
        (named(reader_shift, transposed=True), MOVING, ["this is R(-k) = R(k)^T"]),
        (named(reader_shift, pairs="half"), SHIFT_CASES[:3] + SHIFT_CASES[4:], ["i + d_model/2"]),
        (
            named(reader_shift, angle="1"),
            [c for c in SHIFT_CASES if c != "k = 1, d_model = 4"],
            ["every block rotates by w_i"],
        ),
        (
            named(reader_shift, transposed=True, pairs="half"),
            MOVING,
            ["this is R(-k)", "i + d_model/2"],
        ),
    ],
)
def test_typical_shift_slips_are_named(fn, cases, problems):
    report = check_sinusoidal_shift(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    for text in problems_by_case.values():
        for problem in problems:
            assert problem in text


# ---------------------------------------------------------------------------
# check_rope
# ---------------------------------------------------------------------------


def reader_rope(x, positions, *, pairs="interleaved", sign=1.0, power="2i/d", use_positions=True):
    d = x.shape[-1]
    pos = np.asarray(positions) if use_positions else np.arange(x.shape[-2])
    i = np.arange(d // 2)
    w = 10000.0 ** (-(2 * i if power == "2i/d" else i) / d)
    f = sign * pos[:, None] * w  # (n, d/2)
    if pairs == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]
    first, second = a * np.cos(f) - b * np.sin(f), a * np.sin(f) + b * np.cos(f)
    out = np.empty_like(x)
    if pairs == "interleaved":
        out[..., 0::2], out[..., 1::2] = first, second
    else:
        out[..., : d // 2], out[..., d // 2 :] = first, second
    return out


def complex_rope(x, positions):
    """Meta's way: pairs as complex numbers, times e^(i m θ)."""
    d = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d))
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape).astype(x.dtype)


def in_place_rope(x, positions):
    d = x.shape[-1]
    f = np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    x[..., 0::2] = x[..., 0::2] * np.cos(f) - x[..., 1::2] * np.sin(f)
    x[..., 1::2] = x[..., 0::2] * np.sin(f) + x[..., 1::2] * np.cos(f)
    return x


ROPE_CASES = [
    "5 positions, d = 4",
    "positions 0, 7, 100; d = 8",
    "two heads, x of shape (2, 6, 8)",
    "a single pair, d = 2",
    "float32 input",
]
WIDE = [c for c in ROPE_CASES if c != "a single pair, d = 2"]


def test_the_books_rope_is_refused():
    assert_refused(check_rope(helpers.rope), "helpers.positional.rope")
    assert_refused(
        checks.check_rope_half(lambda x, p: helpers.rope(x, p, layout="half")),
        "helpers.positional.rope",
    )


@pytest.mark.parametrize("fn", [reader_rope, complex_rope])
def test_correct_rope_passes(fn):
    report = check_rope(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == ROPE_CASES


@pytest.mark.parametrize(
    ("fn", "cases", "problems", "hint"),
    [
        (
            named(reader_rope, pairs="half"),
            WIDE,
            ["the pairs are (i, i + d/2)"],
            "in the interleaved layout, pair i is coordinates 2i and 2i + 1",
        ),
        (
            named(reader_rope, sign=-1.0),
            ROPE_CASES,
            ["rotated the wrong way"],
            "a quarter turn takes the pair (1, 0) to (0, 1)",
        ),
        (named(reader_rope, power="i/d"), WIDE, ["the factor 2 in the exponent is missing"], ""),
        (
            named(reader_rope, use_positions=False),
            ["positions 0, 7, 100; d = 8", "two heads, x of shape (2, 6, 8)", "float32 input"],
            ["the positions argument is ignored"],
            "use the positions given",
        ),
        (
            named(reader_rope, pairs="half", sign=-1.0),
            ROPE_CASES,
            ["the pairs are (i, i + d/2)", "rotated the wrong way"],
            "",
        ),
        (
            in_place_rope,
            ROPE_CASES,
            ["changed its input x in place"],
            "write the result into a new array",
        ),
    ],
)
def test_typical_rope_slips_are_named(fn, cases, problems, hint):
    report = check_rope(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    for name in cases:
        for problem in problems:
            if name == "a single pair, d = 2" and "(i, i + d/2)" in problem:
                continue  # with one pair, both layouts are the same
            assert problem in problems_by_case[name]
    assert hint in flat(report)


def test_rope_with_a_frequency_per_coordinate_is_named():
    def per_coordinate(x, positions):
        d = x.shape[-1]
        f = np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(d) / d)  # (n, d)
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * np.cos(f[:, 0::2]) - b * np.sin(f[:, 0::2])
        out[..., 1::2] = a * np.sin(f[:, 1::2]) + b * np.cos(f[:, 1::2])
        return out

    report = check_rope(per_coordinate)
    assert not report
    assert all("not a rotation" in p for p in failed(report).values())


# ---------------------------------------------------------------------------
# check_rope_layout_conversion
# ---------------------------------------------------------------------------


def reader_convert(W, num_heads, *, rows=False, per_head=True, inverse=False):
    width = W.shape[0] if rows else W.shape[1]
    d_head = width // num_heads if per_head else width
    within = np.r_[0:d_head:2, 1:d_head:2]
    if inverse:
        within = np.argsort(within)
    order = np.concatenate([h * d_head + within for h in range(width // d_head)])
    return W[order] if rows else W[:, order]


def convert_by_reshape(W, num_heads):
    """The Hugging Face way, on the transpose: view (h, d_head/2, 2), swap the last two."""
    d_model, width = W.shape
    d_head = width // num_heads
    Wt = W.T.reshape(num_heads, d_head // 2, 2, d_model).transpose(0, 2, 1, 3)
    return Wt.reshape(width, d_model).T


CONVERSION_CASES = [
    "one head, d_k = 8",
    "two heads of width 6",
    "three heads of width 8",
    "W of shape (10, 12): two heads of width 6",
]


@pytest.mark.parametrize("fn", [reader_convert, convert_by_reshape])
def test_correct_conversions_pass(fn):
    report = check_rope_layout_conversion(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == CONVERSION_CASES


def test_the_conversion_keeps_every_score():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, 12))
    W_Q, W_K = rng.normal(size=(2, 12, 12))

    def split(Y):
        return Y.reshape(7, 2, 6).transpose(1, 0, 2)  # (heads, n, d_head)

    def scores(q, k, layout):
        return helpers.rope(q, layout=layout) @ np.swapaxes(helpers.rope(k, layout=layout), -1, -2)

    before = scores(split(X @ W_Q), split(X @ W_K), "interleaved")
    after = scores(split(X @ reader_convert(W_Q, 2)), split(X @ reader_convert(W_K, 2)), "half")
    np.testing.assert_allclose(after, before, atol=1e-12)


@pytest.mark.parametrize(
    ("fn", "cases", "problems"),
    [
        (named(reader_convert, inverse=True), CONVERSION_CASES, ["the inverse permutation"]),
        (
            named(reader_convert, per_head=False),
            CONVERSION_CASES[1:],
            ["the permutation runs over the whole width"],
        ),
        (
            named(reader_convert, rows=True),
            CONVERSION_CASES,
            ["the rows of W are permuted"],
        ),
        (
            named(reader_convert, per_head=False, inverse=True),
            CONVERSION_CASES,
            ["whole width", "the inverse permutation"],
        ),
        (lambda W, num_heads: W, CONVERSION_CASES, ["W is returned unchanged"]),
    ],
)
def test_typical_conversion_slips_are_named(fn, cases, problems):
    report = check_rope_layout_conversion(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    for name in cases:
        if name == "one head, d_k = 8" and "whole width" in problems:
            continue  # one head: whole width = per head; only the inverse shows
        for problem in problems:
            assert problem in problems_by_case[name]


# ---------------------------------------------------------------------------
# check_rope_layout_inverse
# ---------------------------------------------------------------------------

INVERSE_CASES = [
    "one head, d_k = 8",
    "two heads of width 6",
    "three heads of width 8",
    "W of shape (10, 24): two heads of width 12",
]


def interleave_halves(W, num_heads):
    """A reader's inverse written directly: the halves of each head go to evens and odds."""
    d_head = W.shape[1] // num_heads
    out = np.empty_like(W)
    for h in range(num_heads):
        head = W[:, h * d_head : (h + 1) * d_head]
        out[:, h * d_head : (h + 1) * d_head : 2] = head[:, : d_head // 2]
        out[:, h * d_head + 1 : (h + 1) * d_head : 2] = head[:, d_head // 2 :]
    return out


@pytest.mark.parametrize(
    "fn", [named(reader_convert, inverse=True), interleave_halves], ids=["argsort", "direct"]
)
def test_correct_inverse_conversions_pass(fn):
    report = check_rope_layout_inverse(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == INVERSE_CASES


def test_the_inverse_undoes_the_conversion_and_keeps_every_score():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(7, 12))
    W_Q, W_K = rng.normal(size=(2, 12, 12))
    assert np.array_equal(interleave_halves(reader_convert(W_Q, 2), 2), W_Q)

    def scores(W_q, W_k, layout):
        q, k = (Y.reshape(7, 2, 6).transpose(1, 0, 2) for Y in (X @ W_q, X @ W_k))
        return helpers.rope(q, layout=layout) @ np.swapaxes(helpers.rope(k, layout=layout), -1, -2)

    np.testing.assert_allclose(
        scores(interleave_halves(W_Q, 2), interleave_halves(W_K, 2), "interleaved"),
        scores(W_Q, W_K, "half"),
        atol=1e-12,
    )


@pytest.mark.parametrize(
    ("fn", "cases", "problems"),
    [
        (reader_convert, INVERSE_CASES, ["applied once more"]),
        (
            named(reader_convert, per_head=False, inverse=True),
            INVERSE_CASES[1:],
            ["the permutation runs over the whole width"],
        ),
        (
            named(reader_convert, rows=True, inverse=True),
            INVERSE_CASES,
            ["the rows of W are permuted"],
        ),
        (
            named(reader_convert, per_head=False),
            INVERSE_CASES,
            ["whole width", "applied once more"],
        ),
        (lambda W, num_heads: W, INVERSE_CASES, ["W is returned unchanged"]),
    ],
)
def test_typical_inverse_slips_are_named(fn, cases, problems):
    report = check_rope_layout_inverse(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    for name in cases:
        for problem in problems:
            if name == "one head, d_k = 8" and problem == "whole width":
                continue  # one head: whole width = per head
            assert problem in problems_by_case[name]


def test_the_forward_order_is_its_own_inverse_only_up_to_d_head_4():
    # why the check uses heads of width 6 and more: for 2 and 4 the slip would pass
    for d_head in (2, 4, 6, 8, 12):
        order = np.r_[0:d_head:2, 1:d_head:2]
        assert np.array_equal(order[order], np.arange(d_head)) == (d_head <= 4)


# ---------------------------------------------------------------------------
# check_alibi_slopes
# ---------------------------------------------------------------------------


def recursive_slopes(h):
    """The paper's code, recursion and all."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(np.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if np.log2(h).is_integer():
        return power_of_2(h)
    p = 2 ** int(np.floor(np.log2(h)))
    return power_of_2(p) + recursive_slopes(2 * p)[0::2][: h - p]


NOT_POWERS = ["h = 6", "h = 12", "h = 5", "h = 24"]
SLOPE_CASES = ["h = 1", "h = 2", "h = 8", "h = 16", *NOT_POWERS]


def test_the_books_slopes_are_refused():
    for fn in (helpers.alibi_slopes, lambda h: -helpers.alibi_bias(h, 2)[:, 1, 0]):
        assert_refused(check_alibi_slopes(fn), "helpers.positional.alibi_slopes")


@pytest.mark.parametrize("fn", [recursive_slopes])
def test_correct_slopes_pass(fn):
    report = check_alibi_slopes(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == SLOPE_CASES


def geometric(h):
    return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)


@pytest.mark.parametrize(
    ("fn", "cases", "problem"),
    [
        (geometric, NOT_POWERS, "the power-of-2 formula, applied to"),
        (lambda h: 2.0 ** (-8.0 * np.arange(h) / h), SLOPE_CASES, "the first slope is 1"),
        (
            lambda h: geometric(1 << (h - 1).bit_length())[:h],
            NOT_POWERS,
            "these are the first",
        ),
        (
            lambda h: np.concatenate(
                [geometric(1 << (h.bit_length() - 1)), geometric(2 << (h.bit_length() - 1))[1::2]]
            )[:h],
            NOT_POWERS,
            "the 2nd, 4th, ...",
        ),
        (lambda h: recursive_slopes(h)[::-1], SLOPE_CASES[1:], "in reverse order"),
        (lambda h: np.sort(recursive_slopes(h))[::-1], NOT_POWERS, "the right slopes, sorted"),
    ],
)
def test_typical_slope_slips_are_named(fn, cases, problem):
    report = check_alibi_slopes(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(cases)
    assert all(problem in text for text in problems_by_case.values()), problems_by_case


def test_mpt_slopes_are_the_papers_written_another_way():
    """MPT's code takes the odd-numbered slopes of the next power of 2, then the
    even-numbered ones: the same numbers, since 2^(-8k/p) = 2^(-8(2k)/(2p))."""

    def mpt(h):
        upper = 1 << (h - 1).bit_length()
        s = geometric(upper)
        return np.concatenate([s[1::2], s[0::2]])[:h] if upper != h else s

    assert_all_passed(check_alibi_slopes(mpt))


def sequential_copy_rope(x, positions):
    """Each pair updated one coordinate at a time, in a copy: x itself is not changed."""
    d = x.shape[-1]
    f = np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    out = x.copy()
    out[..., 0::2] = out[..., 0::2] * np.cos(f) - out[..., 1::2] * np.sin(f)
    out[..., 1::2] = out[..., 0::2] * np.sin(f) + out[..., 1::2] * np.cos(f)
    return out


def float32_angle_rope(x, positions):
    """The rotation right, but its angles (and their cos, sin) in float32."""
    d = x.shape[-1]
    theta = (10000.0 ** (-np.arange(0, d, 2) / d)).astype(np.float32)
    f = np.asarray(positions, dtype=np.float32)[:, None] * theta  # float32 angles
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(f) - x[..., 1::2] * np.sin(f)
    out[..., 1::2] = x[..., 0::2] * np.sin(f) + x[..., 1::2] * np.cos(f)
    return out


def test_a_pair_updated_one_coordinate_at_a_time_in_a_copy_is_named():
    report = check_rope(sequential_copy_rope)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(ROPE_CASES)
    for problem in problems_by_case.values():
        assert "computed from the already rotated first one" in problem
        assert "in place" not in problem  # x was not changed: the copy is not the slip
    assert "both new coordinates of a pair come from its two original ones" in flat(report)


def test_float32_angles_on_float64_input_are_named_and_float32_input_is_accepted():
    report = check_rope(float32_angle_rope)
    problems_by_case = failed(report)
    assert problems_by_case  # at least one float64 case fails at float64's precision ...
    assert "float32 input" not in problems_by_case  # ... while float32 input may be float32
    for problem in problems_by_case.values():
        assert "right to float32 precision only" in problem
        assert "computed in float32" in problem
    assert "the angles need float64 whatever the dtype of x" in flat(report)


def test_a_slip_far_above_float32_precision_is_not_called_float32():
    def off_by_a_bit(x, positions):
        return reader_rope(x, positions) * 1.01

    report = check_rope(off_by_a_bit)
    assert not report and "float32" not in " ".join(failed(report).values())


def test_negated_slopes_are_named():
    report = check_alibi_slopes(lambda h: -np.array(recursive_slopes(h)))
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == sorted(SLOPE_CASES)
    for problem in problems_by_case.values():
        assert "the slopes are negative" in problem
        assert "the minus sign belongs to the bias" in problem


def _concatenated_shift(k, d_model):
    half = d_model // 2
    i = np.arange(half)
    a = k * 10000.0 ** (-2 * i / d_model)
    R = np.zeros((d_model, d_model))
    R[i, i], R[i, i + half], R[i + half, i], R[i + half, i + half] = (
        np.cos(a),
        -np.sin(a),
        np.sin(a),
        np.cos(a),
    )
    return R


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (reader_shift, "this is R for the interleaved layout"),
        (lambda k, d: _concatenated_shift(k, d).T, "this is R(-k) = R(k)^T"),
        (lambda k, d: _concatenated_shift(1, d), "whatever k is"),
    ],
)
def test_check_concatenated_shift_names_each_mistake(wrong, problem):
    assert checks.check_concatenated_shift(_concatenated_shift).status == "passed"
    # the interleaved layout's own check rejects the concatenated matrix, and vice versa
    assert check_sinusoidal_shift(_concatenated_shift).status == "failed"
    report = checks.check_concatenated_shift(wrong)
    assert report.status == "failed"
    assert any(problem in f.problem for f in report.failures), report


def _rope_half(x, positions):
    h = x.shape[-1] // 2
    angle = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-2 * np.arange(h) / (2 * h))
    a, b = x[..., :h], x[..., h:]
    return np.concatenate(
        [a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)], axis=-1
    )


def _rope_half_in_place(x, positions):
    x[...] = _rope_half(x, positions)
    return x


def _rope_half_sequential(x, positions):
    h = x.shape[-1] // 2
    angle = np.asarray(positions, dtype=float)[:, None] * 10000.0 ** (-2 * np.arange(h) / (2 * h))
    out = x.copy()
    out[..., :h] = x[..., :h] * np.cos(angle) - x[..., h:] * np.sin(angle)
    out[..., h:] = out[..., :h] * np.sin(angle) + x[..., h:] * np.cos(angle)
    return out


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (reader_rope, "the interleaved layout"),
        (lambda x, p: _rope_half(x, -np.asarray(p)), "rotated the wrong way"),
        (lambda x, p: _rope_half(x, np.arange(x.shape[-2])), "positions argument is ignored"),
        (_rope_half_in_place, "changed its input x in place"),
        (_rope_half_sequential, "already rotated first"),
    ],
)
def test_check_rope_half_names_each_mistake(wrong, problem):
    assert checks.check_rope_half(_rope_half).status == "passed"
    assert checks.check_rope(_rope_half).status == "failed"
    report = checks.check_rope_half(wrong)
    assert report.status == "failed"
    assert any(problem in f.problem for f in report.failures), report


# ---------------------------------------------------------------------------
# check_position_from_encoding (exercise 4.1): reading a position back
# ---------------------------------------------------------------------------


def reader_position(
    pe,
    *,
    pair="slowest",
    order="sin, cos",
    wrap=True,
    inverse="atan2",
    frequency="2i/d",
    layout="interleaved",
):
    """A reader's decoder; the keywords reproduce the usual slips."""
    d = pe.shape[-1]
    i = d // 2 - 1 if pair == "slowest" else 0
    if layout == "interleaved":
        sin, cos = pe[..., 2 * i], pe[..., 2 * i + 1]
    else:
        sin, cos = pe[..., i], pe[..., i + d // 2]
    if order == "cos, sin":
        sin, cos = cos, sin
    if inverse == "arcsin":
        angle = np.arcsin(sin)
    elif inverse == "arccos":
        angle = np.arccos(cos)
    else:
        angle = np.arctan2(sin, cos)
        if wrap:
            angle = angle % (2 * np.pi)
    w = {"2i/d": 10000.0 ** (-2 * i / d), "i/d": 10000.0 ** (-i / d), "none": 1.0}[frequency]
    return angle / w


def all_pairs_position(pe):
    """Another right answer: the fastest pair's angle, unwrapped pair by pair from the slowest."""
    d = pe.shape[-1]
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    p = (np.arctan2(pe[..., -2], pe[..., -1]) % (2 * np.pi)) / w[-1]
    for i in range(d // 2 - 2, -1, -1):  # refine with faster and faster pairs
        angle = np.arctan2(pe[..., 2 * i], pe[..., 2 * i + 1])
        turns = np.round((p * w[i] - angle) / (2 * np.pi))
        p = (angle + 2 * np.pi * turns) / w[i]
    return p


@pytest.mark.parametrize("fn", [reader_position, all_pairs_position])
def test_correct_decoders_pass(fn):
    assert_all_passed(checks.check_position_from_encoding(fn))


def test_the_cases_encode_what_they_claim():
    # The check's inputs are rows of chapter 4's encoding: at integer positions they are
    # exactly helpers.sinusoidal_encoding's rows.
    from helpers.checks.positional import _encode

    assert np.allclose(_encode(np.arange(7.0), 8), helpers.sinusoidal_encoding(7, 8))
    assert np.allclose(_encode(np.arange(3.0), 128), helpers.sinusoidal_encoding(3, 128))


def nearest_row(pe):
    d = pe.shape[-1]
    table = helpers.sinusoidal_encoding(60000, d)
    return np.argmax(pe @ table.T, axis=-1).astype(float)


@pytest.mark.parametrize(
    ("fn", "cases", "problem"),
    [
        (
            lambda pe: reader_position(pe, pair="fastest"),
            ["positions 0 to 9, d_model = 8", "far positions, d_model = 128"],
            "reduced modulo 2π",
        ),
        (
            lambda pe: reader_position(pe, wrap=False),
            ["past half a turn of the slowest pair, d_model = 8"],
            "come back negative",
        ),
        (
            lambda pe: reader_position(pe, order="cos, sin"),
            ["positions 0 to 9, d_model = 8", "a single pair, d_model = 2"],
            "sine and cosine are swapped",
        ),
        (
            lambda pe: reader_position(pe, inverse="arcsin"),
            ["past half a turn of the slowest pair, d_model = 8"],
            "arcsine of the sine alone",
        ),
        (
            lambda pe: reader_position(pe, inverse="arccos"),
            ["past half a turn of the slowest pair, d_model = 8"],
            "arccosine of the cosine alone",
        ),
        (
            lambda pe: reader_position(pe, frequency="i/d"),
            ["positions 0 to 9, d_model = 8", "far positions, d_model = 128"],
            "lost the factor 2",
        ),
        (
            lambda pe: reader_position(pe, frequency="none"),
            ["positions 0 to 9, d_model = 8"],
            "you returned the pair's angle, not a position",
        ),
        (
            lambda pe: reader_position(pe, layout="concatenated"),
            ["positions 0 to 9, d_model = 8", "a batch of shape (2, 3), d_model = 16"],
            "concatenated layout",
        ),
        (
            lambda pe: reader_position(pe, pair="fastest", inverse="arcsin"),
            ["positions 0 to 9, d_model = 8"],
            "arcsine of the sine alone",
        ),
        (
            nearest_row,
            ["positions between integers, d_model = 8"],
            "a table of encodings at whole positions",
        ),
        (
            lambda pe: 1.5 * reader_position(pe),
            ["positions 0 to 9, d_model = 8"],
            "the true ones times 1.5",
        ),
    ],
)
def test_typical_decoding_slips_are_named(fn, cases, problem):
    report = checks.check_position_from_encoding(fn)
    assert not report
    problems = failed(report)
    for case in cases:
        assert problem in problems[case], (case, problems.get(case))


def test_decoding_hints_never_show_the_answer():
    # A hint diagnoses; it never gives the formula or the code of the answer.
    fns = [
        lambda pe: reader_position(pe, pair="fastest"),
        lambda pe: reader_position(pe, wrap=False),
        lambda pe: reader_position(pe, order="cos, sin"),
        lambda pe: reader_position(pe, frequency="i/d"),
        lambda pe: np.zeros(pe.shape[:-1]),
    ]
    for fn in fns:
        text = flat(checks.check_position_from_encoding(fn))
        for giveaway in ("arctan2(", "np.", "% (2", "10000**", "10000 **", "pe[..."):
            assert giveaway not in text, (giveaway, text)


def test_a_decoder_that_changes_its_input_is_reported():
    def in_place(pe):
        pe[..., -1] = np.clip(pe[..., -1], -1, 1)
        pe *= 1.0 + 1e-3
        return reader_position(pe)

    report = checks.check_position_from_encoding(in_place)
    assert not report and "in place" in flat(report)
