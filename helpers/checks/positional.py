"""Self-checks of chapter 4 (positional encodings), built on :mod:`helpers.checks.core`.

Each check calls the reader's function on a few chosen inputs and compares with
:mod:`helpers.positional`. When an answer is wrong, the diagnosis recomputes the answer
with each usual slip (and pairs of them: a layout and a frequency slip often come
together) and names the ones that reproduce the reader's numbers: the concatenated
layout, sine and cosine swapped, a missing factor 2 in the exponent, the column index
in the exponent, a rotation the wrong way, pairs (i, i + d/2) instead of (2i, 2i + 1),
the power-of-two slope formula applied to any number of heads, ...
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from helpers.checks.core import Case, CheckReport, Diagnose, Finding, section
from helpers.checks.multihead import _append, _run, _Spec
from helpers.i18n import msg
from helpers.positional import (
    alibi_slopes,
    rope,
    sinusoidal_encoding,
    sinusoidal_shift,
)

__all__ = [
    "check_alibi_slopes",
    "check_concatenated_shift",
    "check_position_from_encoding",
    "check_rope",
    "check_rope_half",
    "check_rope_layout_conversion",
    "check_rope_layout_inverse",
    "check_sinusoidal_encoding",
    "check_sinusoidal_shift",
]

# A slip is recognised when the reader's answer equals what it produces this closely
# (float64 answers of different slips differ by far more on the cases below).
_SLIP_RTOL, _SLIP_ATOL = 1e-6, 1e-9

Variant = Mapping[str, str]


def _recognise(
    got: np.ndarray,
    slips: Mapping[str, Sequence[str]],
    answer: Callable[[Variant], np.ndarray],
    text: Callable[[str, str], Finding],
    *,
    max_slips: int = 3,
) -> list[Finding]:
    """The findings of the fewest slips whose answer equals ``got``, or [].

    ``slips`` maps each kind of slip to its variants, the right one first; ``answer``
    computes the answer with the given variants (the right one where not named).
    """
    kinds = list(slips)
    with np.errstate(all="ignore"):
        for size in range(1, max_slips + 1):
            for chosen in itertools.combinations(kinds, size):
                for variants in itertools.product(*(slips[k][1:] for k in chosen)):
                    variant = dict(zip(chosen, variants, strict=True))
                    candidate = answer(variant)
                    if candidate.shape == got.shape and np.allclose(
                        got, candidate, rtol=_SLIP_RTOL, atol=_SLIP_ATOL
                    ):
                        return [text(k, v) for k, v in variant.items()]
    return []


def _with_hint(report: CheckReport, problem_contains: str, hint: str) -> CheckReport:
    """Replace the hint of every failure whose problem mentions ``problem_contains``."""
    results = tuple(
        dataclasses.replace(r, hint=hint) if problem_contains in r.problem else r
        for r in report.results
    )
    return dataclasses.replace(report, results=results)


def _evens_then_odds(d: int) -> np.ndarray:
    """Column order that turns pairs (2i, 2i + 1) into pairs (i, i + d/2)."""
    return np.r_[0:d:2, 1:d:2]


# ---------------------------------------------------------------------------
# check_sinusoidal_encoding
# ---------------------------------------------------------------------------

_PE_SLIPS: dict[str, tuple[str, ...]] = {
    "layout": ("interleaved", "concatenated", "cos first"),
    "exponent": ("2i/d", "i/d", "j/d", "+2i/d", "i/(d/2-1)"),
    "positions": ("from 0", "from 1"),
}

_PE_FORMULA = (
    "PE[p, 2i] = sin(p / 10000**(2i/d_model)) and PE[p, 2i+1] = cos(p / 10000**(2i/d_model)) "
    "for p = 0, ..., n-1 and i = 0, ..., d_model/2 - 1"
)


def _pe_variant(n: int, d: int, variant: Variant) -> np.ndarray:
    choice = {k: variant.get(k, v[0]) for k, v in _PE_SLIPS.items()}
    i = np.arange(d // 2)
    exponent = {
        "2i/d": -2 * i / d,
        "i/d": -i / d,
        "+2i/d": 2 * i / d,
        "i/(d/2-1)": -i / max(d // 2 - 1, 1),
    }
    p = np.arange(n, dtype=np.float64)[:, None] + (1 if choice["positions"] == "from 1" else 0)
    if choice["exponent"] == "j/d":  # the column index j in the exponent, for sin and cos
        sin = np.sin(p * 10000.0 ** (-2 * i / d))
        cos = np.cos(p * 10000.0 ** (-(2 * i + 1) / d))
    else:
        angle = p * 10000.0 ** exponent[choice["exponent"]]
        sin, cos = np.sin(angle), np.cos(angle)
    PE = np.empty((n, d))
    if choice["layout"] == "concatenated":
        PE[:, : d // 2], PE[:, d // 2 :] = sin, cos
    elif choice["layout"] == "cos first":
        PE[:, 0::2], PE[:, 1::2] = cos, sin
    else:
        PE[:, 0::2], PE[:, 1::2] = sin, cos
    return PE


def _pe_text(kind: str, variant: str) -> Finding:
    texts = {
        ("layout", "concatenated"): (
            "the sines and cosines are concatenated (all sines, then all cosines), the layout "
            "of some libraries; this book's layout interleaves them",
            "put sin(p w_i) in column 2i and cos(p w_i) in column 2i+1: PE[:, 0::2] = sin, "
            "PE[:, 1::2] = cos",
        ),
        ("layout", "cos first"): (
            "sine and cosine are swapped: the cosines are in the even columns",
            "column 2i holds the sine and column 2i+1 the cosine of the same angle",
        ),
        ("exponent", "i/d"): (
            "the exponent is -i/d_model, the factor 2 is missing: the frequencies reach "
            "only 10000**-0.5 instead of nearly 1/10000",
            "w_i = 10000**(-2i/d_model) with i = 0, ..., d_model/2 - 1 the pair index",
        ),
        ("exponent", "j/d"): (
            "the exponent uses the column index j (10000**(-j/d_model)), so the cosine of a "
            "pair has a different frequency from its sine",
            "sin and cos of pair i share one frequency, 10000**(-2i/d_model): in column "
            "j use 2 * (j // 2), not j",
        ),
        ("exponent", "+2i/d"): (
            "the exponent has the wrong sign: p * 10000**(2i/d_model) instead of "
            "p / 10000**(2i/d_model), so the frequencies grow instead of falling",
            "w_i = 1 / 10000**(2i/d_model) = 10000**(-2i/d_model)",
        ),
        ("exponent", "i/(d/2-1)"): (
            "the frequencies are spaced as 10000**(-i/(d_model/2 - 1)) (tensor2tensor and "
            "fairseq code) rather than by the paper's 10000**(-2i/d_model)",
            "w_i = 10000**(-2i/d_model): the slowest frequency is 10000**(-(d_model-2)/d_model)",
        ),
        ("positions", "from 1"): (
            "the positions start at 1: row 0 must be position 0 (sin 0 = 0, cos 0 = 1)",
            "p = np.arange(n), from 0",
        ),
    }
    return Finding(*texts[kind, variant])


def _pe_diagnose(n: int, d: int) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _recognise(got, _PE_SLIPS, lambda v: _pe_variant(n, d, v), _pe_text)

    return diagnose


def check_sinusoidal_encoding(fn: Callable[[int, int], npt.ArrayLike]) -> CheckReport:
    """Check the reader's sinusoidal position encoding (the interleaved layout).

    Parameters
    ----------
    fn : callable
        ``fn(n, d_model) -> PE`` of shape ``(n, d_model)``, called with Python ints:
        ``PE[p, 2i] = sin(p w_i)``, ``PE[p, 2i+1] = cos(p w_i)``,
        ``w_i = 10000 ** (-2i / d_model)``, positions ``p = 0, ..., n - 1``.

    Returns
    -------
    CheckReport
        Truthy iff every case matches :func:`helpers.sinusoidal_encoding`. The report
        recognises the concatenated layout, sine and cosine swapped, the exponent
        ``-i/d_model`` (no 2), the column index in the exponent, a positive exponent,
        tensor2tensor's spacing and positions from 1, alone or combined.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_sinusoidal_encoding
    >>> def concatenated(n, d_model):
    ...     w = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    ...     angles = np.arange(n)[:, None] * w
    ...     return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    >>> report = check_sinusoidal_encoding(concatenated)
    >>> bool(report), report.failures[0].problem.split(" (")[0]
    (False, 'the sines and cosines are concatenated')
    """
    layouts = [
        ("n = 6, d_model = 8", 6, 8),
        ("n = 50, d_model = 16", 50, 16),
        ("a single pair, d_model = 2", 5, 2),
        ("d_model = 128", 4, 128),
    ]
    specs = [
        _Spec(
            Case(name, {}, sinusoidal_encoding(n, d), _PE_FORMULA),
            _append(n, d),
            msg("n = {n}, d_model = {d}", n=n, d=d),
            _pe_diagnose(n, d),
        )
        for name, n, d in layouts
    ]
    return _run(fn, "check_sinusoidal_encoding", specs)


# ---------------------------------------------------------------------------
# check_sinusoidal_shift
# ---------------------------------------------------------------------------

_SHIFT_SLIPS: dict[str, tuple[str, ...]] = {
    "direction": ("+k", "-k"),
    "pairs": ("(2i, 2i+1)", "(i, i+d/2)"),
    "angle": ("k w_i", "w_i", "k w_i (no 2)"),
}

_SHIFT_SECTION = section(4, "A shift is a rotation")
_SHIFT_MORE = (
    "write the pair [sin((p + k) w), cos((p + k) w)] with the addition formulas, as the row "
    "[sin(p w), cos(p w)] times a 2 x 2 matrix; each pair of columns of the encoding gets "
    "its own block, at the rows and columns where the layout keeps that pair"
)


def _shift_variant(k: float, d: int, variant: Variant) -> np.ndarray:
    choice = {key: variant.get(key, v[0]) for key, v in _SHIFT_SLIPS.items()}
    sign = -1.0 if choice["direction"] == "-k" else 1.0
    if choice["angle"] == "w_i":
        R = sinusoidal_shift(sign, d)
    elif choice["angle"] == "k w_i (no 2)":
        R = sinusoidal_shift(sign * k, d, base=10000.0**0.5)  # w_i = 10000**(-i/d)
    else:
        R = sinusoidal_shift(sign * k, d)
    if choice["pairs"] == "(i, i+d/2)":
        order = _evens_then_odds(d)  # coordinate i -> 2i, i + d/2 -> 2i + 1
        R = R[np.ix_(order, order)]
    return R


def _shift_text(kind: str, variant: str) -> Finding:
    texts = {
        ("direction", "-k"): (
            "this is R(-k) = R(k)^T: it moves PE[p] back to PE[p - k]. Written for column "
            "vectors, PE_{p+k} = T_k PE_p, the matrix is the transpose of the one for rows",
            "the row PE[p] times R must give PE[p + k] (the statement): check the signs of "
            "one 2 x 2 block on a single pair at p = 0",
        ),
        ("pairs", "(i, i+d/2)"): (
            "the blocks couple coordinates i and i + d_model/2, the concatenated layout; "
            "here sin and cos of pair i are in columns 2i and 2i+1",
            "each block sits where its pair sits in the encoding",
        ),
        ("angle", "w_i"): (
            "every block rotates by w_i, a shift of one position, whatever k is",
            "a shift by k is k shifts by one position",
        ),
        ("angle", "k w_i (no 2)"): (
            "the frequencies are 10000**(-i/d_model): the factor 2 in the exponent is missing",
            "the frequencies are those of the encoding, one per pair",
        ),
    }
    return Finding(*texts[kind, variant])


def _shift_diagnose(k: float, d: int) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _recognise(got, _SHIFT_SLIPS, lambda v: _shift_variant(k, d, v), _shift_text)

    return diagnose


def _shift_text_concatenated(kind: str, variant: str) -> Finding:
    if kind == "pairs":
        return Finding(
            "the blocks couple coordinates 2i and 2i + 1: this is R for the interleaved "
            "layout; in the concatenated layout sin and cos of pair i are in columns i and "
            "i + d_model/2",
            "each block sits where its pair sits in the concatenated encoding",
        )
    return _shift_text(kind, variant)


def _shift_diagnose_concatenated(k: float, d: int) -> Diagnose:
    def answer(variant: Variant) -> np.ndarray:
        # The right answer here is the "(i, i+d/2)" variant, and the interleaved R a slip.
        v = dict(variant)
        v["pairs"] = "(2i, 2i+1)" if v.get("pairs") == "(i, i+d/2)" else "(i, i+d/2)"
        return _shift_variant(k, d, v)

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _recognise(got, _SHIFT_SLIPS, answer, _shift_text_concatenated)

    return diagnose


def check_sinusoidal_shift(
    fn: Callable[[int, int], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's shift matrix of the sinusoidal encoding.

    Parameters
    ----------
    fn : callable
        ``fn(k, d_model) -> R`` of shape ``(d_model, d_model)``, called with Python ints,
        such that ``PE[p + k] = PE[p] @ R`` for the encoding of
        :func:`check_sinusoidal_encoding` (rows, interleaved layout), every ``p``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises the transposed matrix
        (which shifts by ``-k``), blocks on the pairs of the concatenated layout, an
        angle not multiplied by ``k``, and a missing 2 in the exponent.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_sinusoidal_shift
    >>> def no_shift(k, d_model):  # right for k = 0 only
    ...     return np.eye(d_model)
    >>> [r.name for r in check_sinusoidal_shift(no_shift).results if r.passed]
    ['no shift, k = 0']
    """
    return _check_shift(fn, "interleaved", "check_sinusoidal_shift", hint)


def check_concatenated_shift(
    fn: Callable[[int, int], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's shift matrix of the sinusoidal encoding in the concatenated layout.

    Parameters
    ----------
    fn : callable
        ``fn(k, d_model) -> R'`` of shape ``(d_model, d_model)``, called with Python
        ints, such that ``PE'[p + k] = PE'[p] @ R'`` for every ``p``, where
        ``PE' = PE[:, evens then odds]`` is the encoding with all sines first, then all
        cosines.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises the interleaved layout's
        ``R`` (blocks on pairs ``2i, 2i + 1``), the transposed matrix, an angle not
        multiplied by ``k`` and a missing 2 in the exponent.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_concatenated_shift
    >>> def no_shift(k, d_model):  # right for k = 0 only
    ...     return np.eye(d_model)
    >>> [r.name for r in check_concatenated_shift(no_shift).results if r.passed]
    ['no shift, k = 0']
    """
    return _check_shift(fn, "concatenated", "check_concatenated_shift", hint)


def _check_shift(
    fn: Callable[[int, int], npt.ArrayLike], layout: str, check_name: str, hint: bool = False
) -> CheckReport:
    layouts = [
        ("k = 1, d_model = 4", 1, 4, "a shift by one position, for every p"),
        ("k = 5, d_model = 8", 5, 8, "a shift by 5 positions: 5 shifts by one"),
        (
            "a shift back, k = -3, d_model = 6",
            -3,
            6,
            "a shift back: it undoes a shift by 3",
        ),
        ("no shift, k = 0", 0, 4, "no shift: R leaves every row PE[p] unchanged"),
        (
            "a long shift, k = 250, d_model = 16",
            250,
            16,
            "a long shift: the fast pairs turn many times round",
        ),
    ]
    concatenated = layout == "concatenated"

    def expected(k: int, d: int) -> np.ndarray:
        R = sinusoidal_shift(k, d)
        order = _evens_then_odds(d)
        return R[np.ix_(order, order)] if concatenated else R

    specs = [
        _Spec(
            Case(name, {}, expected(k, d), text),
            _append(k, d),
            msg("k = {k}, d_model = {d}", k=k, d=d)
            + (", concatenated layout" if concatenated else ""),
            (_shift_diagnose_concatenated if concatenated else _shift_diagnose)(k, d),
        )
        for name, k, d, text in layouts
    ]
    return _run(fn, check_name, specs, see=_SHIFT_SECTION, more=_SHIFT_MORE, hint=hint)


# ---------------------------------------------------------------------------
# check_rope
# ---------------------------------------------------------------------------

_ROPE_SLIPS: dict[str, tuple[str, ...]] = {
    "pairs": ("interleaved", "half"),
    "direction": ("counterclockwise", "clockwise"),
    "frequency": ("2i/d", "i/d", "j/d"),
    "positions": ("given", "0..n-1"),
    "update": ("simultaneous", "sequential"),
}

_ROPE_SECTION = section(4, "Rotary position embeddings")
_LAYOUTS = section(4, "Two layouts and the permutation between them")
_ROPE_MORE = (
    "each pair of coordinates of a row is a point in the plane, turned counterclockwise by "
    "the row's position times the pair's frequency: find the pairs of this layout, the "
    "frequency of each, and turn both coordinates of a pair from their original values, "
    "into a new array"
)
_ROPE_IN_PLACE_HINT = "the caller's x must stay as it was: write the result into a new array"


def _rope_variant(x: np.ndarray, positions: np.ndarray, variant: Variant) -> np.ndarray:
    choice = {key: variant.get(key, v[0]) for key, v in _ROPE_SLIPS.items()}
    x = x.astype(np.float64)
    n, d = x.shape[-2:]
    pos = np.arange(n, dtype=np.float64) if choice["positions"] == "0..n-1" else positions
    pos = pos.astype(np.float64)
    sign = -1.0 if choice["direction"] == "clockwise" else 1.0
    i = np.arange(d // 2)
    if choice["frequency"] == "j/d":  # a frequency per coordinate: not a rotation
        a = x[..., 0::2] if choice["pairs"] == "interleaved" else x[..., : d // 2]
        b = x[..., 1::2] if choice["pairs"] == "interleaved" else x[..., d // 2 :]
        j_a, j_b = (2 * i, 2 * i + 1) if choice["pairs"] == "interleaved" else (i, i + d // 2)
        fa = sign * pos[:, None] * 10000.0 ** (-j_a / d)
        fb = sign * pos[:, None] * 10000.0 ** (-j_b / d)
        first = a * np.cos(fa) - b * np.sin(fa)
        second = a * np.sin(fb) + b * np.cos(fb)
        out = np.empty_like(x)
        if choice["pairs"] == "interleaved":
            out[..., 0::2], out[..., 1::2] = first, second
        else:
            out[..., : d // 2], out[..., d // 2 :] = first, second
        return out
    base = 10000.0 if choice["frequency"] == "2i/d" else 10000.0**0.5
    layout = "interleaved" if choice["pairs"] == "interleaved" else "half"
    if choice["update"] == "sequential":  # the second coordinate from the rotated first
        angle = sign * pos[:, None] * base ** (-2.0 * i / d)  # (n, d/2)
        c, s = np.cos(angle), np.sin(angle)
        a = x[..., 0::2] if layout == "interleaved" else x[..., : d // 2]
        b = x[..., 1::2] if layout == "interleaved" else x[..., d // 2 :]
        first = a * c - b * s
        second = first * s + b * c
        out = np.empty_like(x)
        if layout == "interleaved":
            out[..., 0::2], out[..., 1::2] = first, second
        else:
            out[..., : d // 2], out[..., d // 2 :] = first, second
        return out
    return rope(x, sign * pos, base=base, layout=layout)


def _rope_text(kind: str, variant: str) -> Finding:
    texts = {
        ("pairs", "half"): (
            "the pairs are (i, i + d/2), Hugging Face's rotate_half layout; this exercise "
            "rotates the interleaved pairs (2i, 2i+1)",
            "in the interleaved layout, pair i is coordinates 2i and 2i + 1",
        ),
        ("direction", "clockwise"): (
            "every pair is rotated the wrong way (by -positions[t] * w_i)",
            "counterclockwise: a quarter turn takes the pair (1, 0) to (0, 1)",
        ),
        ("frequency", "i/d"): (
            "the frequencies are 10000**(-i/d): the factor 2 in the exponent is missing",
            "the frequencies are the sinusoidal encoding's, one per pair",
        ),
        ("frequency", "j/d"): (
            "the two coordinates of a pair use different angles (the exponent uses the "
            "coordinate index), so the map is not a rotation",
            "both coordinates of a pair turn by the same angle",
        ),
        ("positions", "0..n-1"): (
            "the positions argument is ignored: row t is rotated as if at position t",
            "use the positions given, which need not be 0, 1, ..., n-1 (a cached decoder, "
            "shifted or interpolated positions)",
        ),
        ("update", "sequential"): (
            "the second coordinate of each pair is computed from the already rotated first "
            "one (the pair is updated one coordinate at a time, in a copy or in x)",
            "both new coordinates of a pair come from its two original ones",
        ),
    }
    return Finding(*texts[kind, variant])


def _unrotated(x: np.ndarray, got: np.ndarray) -> list[Finding]:
    """x returned as it came: nothing rotated."""
    if got.shape == x.shape and np.allclose(got, x, rtol=_SLIP_RTOL, atol=_SLIP_ATOL):
        return [
            Finding(
                "x comes back unchanged: nothing was rotated",
                "every pair turns by its position times its frequency; only position 0 "
                "leaves a row as it is",
            )
        ]
    return []


# Angles computed in float32 (positions * theta, or its cos and sin) put a relative error
# of about 6e-8 on each angle: about 1e-7 on the output at the positions of the cases,
# far below any slip and far above float64 rounding.
_FLOAT32_ANGLES = 1e-4


def _float32_angles(x: np.ndarray, expected: np.ndarray, got: np.ndarray) -> list[Finding]:
    """A float64 answer right to float32 precision only: angles computed in float32."""
    if x.dtype != np.float64 or got.shape != expected.shape or not np.isfinite(got).all():
        return []
    error = np.abs(got - expected).max()
    if error == 0 or error > _FLOAT32_ANGLES * max(np.abs(expected).max(), 1.0):
        return []
    return [
        Finding(
            msg(
                "right to float32 precision only (largest difference {error:.1e}) on "
                "float64 input: the angles, or their cosines and sines, were computed in "
                "float32",
                error=error,
            ),
            "the angles need float64 whatever the dtype of x; round to x's dtype only at the end",
        )
    ]


def _rope_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    x, positions = np.asarray(case.inputs["x"]), np.asarray(case.inputs["positions"])
    found = _recognise(got, _ROPE_SLIPS, lambda v: _rope_variant(x, positions, v), _rope_text)
    return found or _unrotated(x, got) or _float32_angles(x, np.asarray(case.expected), got)


def check_rope(
    fn: Callable[[np.ndarray, np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's RoPE in the interleaved layout.

    Parameters
    ----------
    fn : callable
        ``fn(x, positions) -> rotated`` with ``x`` of shape ``(..., n, d)`` (``d`` even)
        and ``positions`` of shape ``(n,)``: pair ``(x[..., t, 2i], x[..., t, 2i+1])`` is
        rotated counterclockwise by ``positions[t] * 10000 ** (-2i / d)``. Same shape
        and dtype as ``x``; ``x`` itself must not change.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises the rotate-half layout, a
        rotation the wrong way, a missing 2 in the exponent, coordinate-wise
        frequencies, ignored positions, a rotation in place, a pair updated one
        coordinate at a time, ``x`` returned unrotated, and angles computed in float32
        for float64 input (float32 input may be answered in float32: its case allows
        that precision).

    Examples
    --------
    >>> from helpers.checks import check_rope
    >>> def unrotated(x, positions):  # a copy of x: every row as if at position 0
    ...     return x.copy()
    >>> check_rope(unrotated).failures[0].problem
    'x comes back unchanged: nothing was rotated'
    """
    rng = np.random.default_rng(4)
    layouts = [
        ("5 positions, d = 4", rng.normal(size=(5, 4)), np.arange(5)),
        ("positions 0, 7, 100; d = 8", rng.normal(size=(3, 8)), np.array([0, 7, 100])),
        ("two heads, x of shape (2, 6, 8)", rng.normal(size=(2, 6, 8)), np.arange(10, 16)),
        ("a single pair, d = 2", rng.normal(size=(4, 2)), np.array([0, 1, 2, 3])),
        (
            "float32 input",
            rng.normal(size=(3, 6)).astype(np.float32),
            np.array([1, 2, 3]),
        ),
    ]
    specs = [
        _Spec(
            Case(name, {"x": x, "positions": p}, rope(x.astype(np.float64), p), _ROPE_TEXTS[name]),
            lambda *arrays: arrays,
            msg(
                "x: {x_shape} ({x_dtype}), positions = {map}",
                x_shape=x.shape,
                x_dtype=x.dtype,
                map=list(map(int, p)),
            ),
            _rope_diagnose,
        )
        for name, x, p in layouts
    ]
    report = _run(fn, "check_rope", specs, see=_ROPE_SECTION, more=_ROPE_MORE, hint=hint)
    return _with_hint(report, "in place", _ROPE_IN_PLACE_HINT)


_ROPE_TEXTS = {
    "5 positions, d = 4": "row t's two pairs turn by t times their frequencies",
    "positions 0, 7, 100; d = 8": "the positions are given, not 0, 1, 2: the row at "
    "position 0 comes back unchanged",
    "two heads, x of shape (2, 6, 8)": "x has a leading axis: every head turns alike",
    "a single pair, d = 2": "a single pair, of frequency 1: row t turns by t radians",
    "float32 input": "float32 input: a float32 answer, right to float32 precision",
}


def _rope_half_text(kind: str, variant: str) -> Finding:
    if kind == "pairs":
        return Finding(
            "the pairs are (2i, 2i+1), the interleaved layout; this exercise rotates the "
            "rotate-half pairs (i, i + d/2)",
            "in the rotate-half layout, pair i is coordinates i and i + d/2",
        )
    if kind == "update":
        return Finding(
            "the second coordinate of each pair is computed from the already rotated first "
            "one (the pair is updated one coordinate at a time, in a copy or in x)",
            "both new coordinates of a pair come from its two original ones",
        )
    return _rope_text(kind, variant)


def _rope_half_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    x, positions = np.asarray(case.inputs["x"]), np.asarray(case.inputs["positions"])

    def answer(variant: Variant) -> np.ndarray:
        # The right answer here is the "half" variant, and the interleaved one a slip.
        v = dict(variant)
        v["pairs"] = "interleaved" if v.get("pairs") == "half" else "half"
        return _rope_variant(x, positions, v)

    found = _recognise(got, _ROPE_SLIPS, answer, _rope_half_text)
    return found or _unrotated(x, got) or _float32_angles(x, np.asarray(case.expected), got)


def check_rope_half(
    fn: Callable[[np.ndarray, np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's RoPE in the rotate-half layout (Hugging Face's).

    Parameters
    ----------
    fn : callable
        ``fn(x, positions) -> rotated`` with ``x`` of shape ``(..., n, d)`` (``d`` even)
        and ``positions`` of shape ``(n,)``: pair ``(x[..., t, i], x[..., t, i + d/2])``
        is rotated counterclockwise by ``positions[t] * 10000 ** (-2i / d)``. Same shape
        and dtype as ``x``; ``x`` itself must not change.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises the interleaved layout, a
        rotation the wrong way, a missing 2 in the exponent, coordinate-wise
        frequencies, ignored positions, a rotation in place, a pair updated one
        coordinate at a time, ``x`` returned unrotated, and angles computed in float32.

    Examples
    --------
    >>> from helpers.checks import check_rope_half
    >>> def unrotated(x, positions):  # a copy of x: every row as if at position 0
    ...     return x.copy()
    >>> check_rope_half(unrotated).status
    'failed'
    """
    rng = np.random.default_rng(6)
    layouts = [
        ("5 positions, d = 4", rng.normal(size=(5, 4)), np.arange(5)),
        ("positions 0, 7, 100; d = 8", rng.normal(size=(3, 8)), np.array([0, 7, 100])),
        ("two heads, x of shape (2, 6, 8)", rng.normal(size=(2, 6, 8)), np.arange(10, 16)),
        ("float32 input", rng.normal(size=(3, 6)).astype(np.float32), np.array([1, 2, 3])),
    ]
    specs = [
        _Spec(
            Case(
                name,
                {"x": x, "positions": p},
                rope(x.astype(np.float64), p, layout="half"),
                _ROPE_TEXTS.get(name, "row t's pairs turn by t times their frequencies"),
            ),
            lambda *arrays: arrays,
            msg(
                "x: {x_shape} ({x_dtype}), positions = {map}",
                x_shape=x.shape,
                x_dtype=x.dtype,
                map=list(map(int, p)),
            ),
            _rope_half_diagnose,
        )
        for name, x, p in layouts
    ]
    report = _run(
        fn,
        "check_rope_half",
        specs,
        see=msg("{rope_section} and {layouts}", rope_section=_ROPE_SECTION, layouts=_LAYOUTS),
        more=_ROPE_MORE,
        hint=hint,
    )
    return _with_hint(report, "in place", _ROPE_IN_PLACE_HINT)


# ---------------------------------------------------------------------------
# check_rope_layout_conversion
# ---------------------------------------------------------------------------

_TO_HALF, _TO_INTERLEAVED = "interleaved -> half", "half -> interleaved"


def _conversion_slips(direction: str) -> dict[str, tuple[str, ...]]:
    """The slips of a conversion in ``direction``, the right variant of each first."""
    other = _TO_INTERLEAVED if direction == _TO_HALF else _TO_HALF
    return {
        "axis": ("columns", "rows"),
        "scope": ("per head", "whole width"),
        "direction": (direction, other),
    }


_CONVERSION_TEXT = (
    "column c of W makes output coordinate c (the queries are X times W): within each head, "
    "every column moves to where the rotate-half layout keeps its coordinate"
)
_INVERSE_TEXT = (
    "column c of W makes output coordinate c (the queries are X times W): within each head, "
    "every column moves back to where the interleaved layout keeps its coordinate"
)
_CONVERSION_MORE = (
    "in one head, list for each coordinate the pair it belongs to and its place in the "
    "pair, in both layouts; the columns of W move with their coordinates, head by head"
)


def _columns_to_half(width: int, num_heads: int, *, scope: str, direction: str) -> np.ndarray:
    d_k = width // num_heads if scope == "per head" else width
    within = _evens_then_odds(d_k)
    if direction == "half -> interleaved":
        within = np.argsort(within)
    return np.concatenate([h * d_k + within for h in range(width // d_k)])


def _conversion_variant(
    W: np.ndarray, num_heads: int, variant: Variant, direction: str = _TO_HALF
) -> np.ndarray:
    choice = {k: variant.get(k, v[0]) for k, v in _conversion_slips(direction).items()}
    if choice["axis"] == "rows":
        order = _columns_to_half(
            W.shape[0], num_heads, scope=choice["scope"], direction=choice["direction"]
        )
        return W[order]
    order = _columns_to_half(
        W.shape[1], num_heads, scope=choice["scope"], direction=choice["direction"]
    )
    return W[:, order]


def _conversion_text(kind: str, variant: str) -> Finding:
    texts = {
        ("axis", "rows"): (
            "the rows of W are permuted; in Q = X @ W the output coordinates are the "
            "columns (PyTorch's nn.Linear stores W^T, whose rows they are)",
            "the coordinates that RoPE pairs are the columns of W",
        ),
        ("scope", "whole width"): (
            "the permutation runs over the whole width, as if there were one head: RoPE "
            "acts on each head's d_k coordinates separately",
            "each head keeps its own columns, rearranged within the head",
        ),
        ("direction", "half -> interleaved"): (
            "this is the inverse permutation: it converts the half layout to the interleaved one",
            "this conversion goes from the interleaved layout to the rotate-half one",
        ),
        ("direction", "interleaved -> half"): (
            "this is the interleaved -> half permutation (evens first, then odds) applied "
            "once more: for d_k > 4 it is not its own inverse, so W is not restored",
            "follow one coordinate of a head of width 8 both ways, and compare",
        ),
    }
    return Finding(*texts[kind, variant])


def _conversion_diagnose(num_heads: int, direction: str = _TO_HALF) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        W = np.asarray(case.inputs["W"])
        if np.array_equal(got, W):
            return [
                Finding(
                    "W is returned unchanged",
                    "the two layouts keep a pair's coordinates in different columns",
                )
            ]
        return _recognise(
            got,
            _conversion_slips(direction),
            lambda v: _conversion_variant(W, num_heads, v, direction),
            _conversion_text,
        )

    return diagnose


def check_rope_layout_conversion(
    fn: Callable[[np.ndarray, int], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's conversion of ``W_Q`` (or ``W_K``) between the RoPE layouts.

    Parameters
    ----------
    fn : callable
        ``fn(W, num_heads) -> W_half``: ``W`` of shape ``(d_model, num_heads * d_k)``
        was trained with the interleaved RoPE (pairs ``(2i, 2i+1)`` of each head);
        ``W_half`` gives the same scores with the rotate-half RoPE (pairs
        ``(i, i + d_k/2)``). It is ``W`` with its columns permuted within each head.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises rows permuted instead of
        columns, one permutation across all heads, the inverse permutation, and ``W``
        returned unchanged.

    Examples
    --------
    >>> from helpers.checks import check_rope_layout_conversion
    >>> def unchanged(W, num_heads):  # as if the two layouts paired the same columns
    ...     return W
    >>> check_rope_layout_conversion(unchanged).failures[0].problem
    'W is returned unchanged'
    """
    rng = np.random.default_rng(5)
    layouts = [
        ("one head, d_k = 8", (8, 8), 1),
        ("two heads of width 6", (12, 12), 2),
        ("three heads of width 8", (24, 24), 3),
        ("W of shape (10, 12): two heads of width 6", (10, 12), 2),
    ]
    specs = []
    for name, shape, h in layouts:
        W = rng.normal(size=shape)
        order = _columns_to_half(shape[1], h, scope="per head", direction="interleaved -> half")
        specs.append(
            _Spec(
                Case(name, {"W": W}, W[:, order], _CONVERSION_TEXT, rtol=0.0, atol=0.0),
                _append(h),
                msg("W: {shape}, num_heads = {h}", shape=shape, h=h),
                _conversion_diagnose(h),
            )
        )
    return _run(
        fn,
        "check_rope_layout_conversion",
        specs,
        see=_LAYOUTS,
        more=_CONVERSION_MORE,
        hint=hint,
    )


def check_rope_layout_inverse(
    fn: Callable[[np.ndarray, int], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's conversion of ``W_Q`` (or ``W_K``) from rotate-half to interleaved.

    Parameters
    ----------
    fn : callable
        ``fn(W, num_heads) -> W_interleaved``: ``W`` of shape
        ``(d_model, num_heads * d_k)`` is used with the rotate-half RoPE (pairs
        ``(i, i + d_k/2)`` of each head); ``W_interleaved`` gives the same scores with
        the interleaved RoPE (pairs ``(2i, 2i+1)``). It undoes
        :func:`check_rope_layout_conversion`'s permutation.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches (heads of width 6, 8 and 12, where the
        evens-then-odds order is not its own inverse). The report recognises the forward
        (evens-then-odds) permutation applied again, rows permuted instead of columns,
        one permutation across all heads, and ``W`` returned unchanged.

    Examples
    --------
    >>> from helpers.checks import check_rope_layout_inverse
    >>> def unchanged(W, num_heads):  # as if the two layouts paired the same columns
    ...     return W
    >>> check_rope_layout_inverse(unchanged).failures[0].problem
    'W is returned unchanged'
    """
    rng = np.random.default_rng(7)
    layouts = [
        ("one head, d_k = 8", (8, 8), 1),
        ("two heads of width 6", (12, 12), 2),
        ("three heads of width 8", (24, 24), 3),
        ("W of shape (10, 24): two heads of width 12", (10, 24), 2),
    ]
    specs = []
    for name, shape, h in layouts:
        W = rng.normal(size=shape)
        order = _columns_to_half(shape[1], h, scope="per head", direction=_TO_INTERLEAVED)
        specs.append(
            _Spec(
                Case(name, {"W": W}, W[:, order], _INVERSE_TEXT, rtol=0.0, atol=0.0),
                _append(h),
                msg("W: {shape}, num_heads = {h}", shape=shape, h=h),
                _conversion_diagnose(h, _TO_INTERLEAVED),
            )
        )
    return _run(
        fn,
        "check_rope_layout_inverse",
        specs,
        see=_LAYOUTS,
        more=_CONVERSION_MORE,
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_alibi_slopes
# ---------------------------------------------------------------------------

_ALIBI = section(4, "ALiBi: linear biases on the scores")


def _geometric(h: int) -> np.ndarray:
    return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)


def _slope_slips(h: int) -> list[tuple[np.ndarray, Finding]]:
    p = 1 << (h.bit_length() - 1)
    right = alibi_slopes(h)
    upper = p if p == h else 2 * p  # the power of 2 at or above h
    power_hint = msg(
        "h = {h} is not a power of 2: the chapter's rule for such h differs from "
        "the geometric sequence of powers of 2",
        h=h,
    )
    slips = [
        (
            _geometric(h),
            Finding(
                msg(
                    "these are 2**(-8k/h) for k = 1, ..., {h}: the power-of-2 formula, "
                    "applied to h = {h}, which is not a power of 2",
                    h=h,
                ),
                power_hint,
            ),
        ),
        (
            2.0 ** (-8.0 * np.arange(h) / h),
            Finding(
                "the exponents start at k = 0, so the first slope is 1",
                "every slope is below 1",
            ),
        ),
        (
            _geometric(upper)[:h],
            Finding(
                msg("these are the first {h} slopes of {upper} heads", h=h, upper=upper),
                power_hint,
            ),
        ),
        (
            np.concatenate([_geometric(p), _geometric(2 * p)[1::2][: h - p]]),
            Finding(
                msg(
                    "the extra slopes are the 2nd, 4th, ... of {value} heads, which repeat "
                    "slopes already used",
                    value=2 * p,
                ),
                "every head gets a slope of its own",
            ),
        ),
        (
            -right,
            Finding(
                "the slopes are negative: these are the right slopes with their signs "
                "flipped. The slopes are positive; the minus sign belongs to the bias, "
                "-slope * (p - p'), so that distant keys are penalised",
                "every slope is positive",
            ),
        ),
        (
            right[::-1],
            Finding("the slopes are in reverse order", "head 1 gets the largest slope"),
        ),
        (
            np.sort(right)[::-1],
            Finding(
                "the right slopes, sorted: the rule's order is not sorted",
                "keep the slopes in the order the rule produces them",
            ),
        ),
    ]
    return [(s, f) for s, f in slips if s.shape == right.shape and not np.allclose(s, right)]


def _slopes_diagnose(h: int) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        for candidate, finding in _slope_slips(h):
            if np.allclose(got, candidate, rtol=_SLIP_RTOL, atol=0):
                return [finding]
        return []

    return diagnose


def check_alibi_slopes(fn: Callable[[int], npt.ArrayLike], *, hint: bool = False) -> CheckReport:
    """Check the reader's ALiBi head slopes.

    Parameters
    ----------
    fn : callable
        ``fn(h) -> slopes`` of shape ``(h,)``, called with a Python int: the slopes of
        Press et al. for ``h`` heads, head 1 first.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches (1, 2, 8, 16, 6, 12, 5 and 24 heads). The report
        recognises the power-of-2 formula applied to any ``h``, exponents from 0, the
        first ``h`` slopes of the next power of 2, the wrong half of the extra slopes,
        negated slopes, and the right slopes reversed or sorted.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_alibi_slopes
    >>> def geometric(h):
    ...     return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)
    >>> report = check_alibi_slopes(geometric)
    >>> [r.name for r in report.failures]
    ['h = 6', 'h = 12', 'h = 5', 'h = 24']
    """
    counts = [1, 2, 8, 16, 6, 12, 5, 24]
    specs = [
        _Spec(
            Case(
                f"h = {h}",
                {},
                alibi_slopes(h),
                "a power of 2: one geometric sequence"
                if h & (h - 1) == 0
                else msg("h = {h} is not a power of 2: the chapter's rule for such h", h=h),
                rtol=1e-9,
                atol=0.0,
            ),
            _append(h),
            f"h = {h}",
            _slopes_diagnose(h),
        )
        for h in counts
    ]
    return _run(
        fn,
        "check_alibi_slopes",
        specs,
        see=_ALIBI,
        more="for a power of 2 the slopes are a geometric sequence; for any other h the "
        "chapter's rule starts from the largest power of 2 below h and takes the missing "
        "slopes from the sequence of twice as many heads, keeping every other one: which "
        "ones, and in which order?",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_position_from_encoding
# ---------------------------------------------------------------------------

# The ways of reading a position back from its encoding that go wrong, the right one first.
_DECODE_SLIPS: dict[str, tuple[str, ...]] = {
    "pair": ("slowest", "fastest"),
    "layout": ("interleaved", "concatenated"),
    "order": ("sin, cos", "cos, sin"),
    "inverse": ("two-argument arctangent", "arcsin", "arccos"),
    "wrap": ("into [0, 2pi)", "none"),
    "frequency": ("the pair's", "no factor 2", "none"),
}

_DECODE_MORE = (
    "the two coordinates of a pair fix its angle, quadrant included, only together; and an "
    "angle tells a position apart from the positions a whole turn away only in a pair that "
    "has not yet completed a turn: ask which pair that is for the positions the check uses"
)
_DECODE_HINT = (
    "every pair of coordinates holds the sine and the cosine of one angle, its position times "
    "its frequency; find a pair whose angle never completes a turn over the positions asked "
    "for, read its angle in [0, 2π), and turn the angle back into a position"
)


def _decode_variant(pe: np.ndarray, variant: Variant) -> np.ndarray:
    """The position read back from ``pe`` with the given slips (see ``_DECODE_SLIPS``)."""
    choice = {k: variant.get(k, v[0]) for k, v in _DECODE_SLIPS.items()}
    d = pe.shape[-1]
    i = d // 2 - 1 if choice["pair"] == "slowest" else 0
    if choice["layout"] == "interleaved":
        first, second = pe[..., 2 * i], pe[..., 2 * i + 1]
    else:  # the concatenated layout read into an interleaved table
        first, second = pe[..., i], pe[..., i + d // 2]
    sin, cos = (second, first) if choice["order"] == "cos, sin" else (first, second)
    if choice["inverse"] == "arcsin":
        angle = np.arcsin(np.clip(sin, -1, 1))
    elif choice["inverse"] == "arccos":
        angle = np.arccos(np.clip(cos, -1, 1))
    else:
        angle = np.arctan2(sin, cos)
    if choice["inverse"] == "two-argument arctangent" and choice["wrap"] == "into [0, 2pi)":
        angle = np.mod(angle, 2 * np.pi)
    frequency = {
        "the pair's": 10000.0 ** (-2 * i / d),
        "no factor 2": 10000.0 ** (-i / d),
        "none": 1.0,
    }[choice["frequency"]]
    return angle / frequency


def _decode_text(kind: str, variant: str) -> Finding:
    texts = {
        ("pair", "fastest"): (
            "your positions are the true ones reduced modulo 2π = 6.283: the pair you read "
            "turns once every 2π positions, so positions a whole turn apart look the same "
            "to it",
            "a pair whose wavelength is longer than every position asked for never "
            "completes a turn: which pair is that, and what is its frequency?",
        ),
        ("layout", "concatenated"): (
            "you read the two coordinates of a pair d_model/2 columns apart, as in the "
            "concatenated layout; this encoding interleaves them",
            "in the interleaved layout the sine and the cosine of a pair sit in two "
            "neighbouring columns, the sine in the even one",
        ),
        ("order", "cos, sin"): (
            "sine and cosine are swapped: the angle you computed is a quarter turn minus "
            "the true one",
            "which column of the pair holds the sine, and which argument of the inverse "
            "tangent expects it?",
        ),
        ("inverse", "arcsin"): (
            "the arcsine of the sine alone is right only while the angle stays within a "
            "quarter turn: beyond it, two angles share each sine",
            "an angle anywhere in a full turn needs both coordinates of the pair",
        ),
        ("inverse", "arccos"): (
            "the arccosine of the cosine alone is right only while the angle stays within "
            "half a turn: beyond it, two angles share each cosine",
            "an angle anywhere in a full turn needs both coordinates of the pair",
        ),
        ("wrap", "none"): (
            "the positions past half the pair's wavelength come back negative, one "
            "wavelength too small: the inverse tangent returns angles between -π and π, "
            "while the encoding's angles run from 0 to 2π",
            "bring each angle into [0, 2π) before turning it into a position",
        ),
        ("frequency", "no factor 2"): (
            "your positions are the true ones times a constant: the frequency you divided "
            "by is not that of the pair you read (its exponent has lost the factor 2)",
            "recompute the frequency of the pair you read from its pair index, as the "
            "encoding defines it",
        ),
        ("frequency", "none"): (
            "you returned the pair's angle, not a position: the angle grows by the pair's "
            "frequency at every position",
            "how many radians does the pair you read turn per position?",
        ),
    }
    return Finding(*texts[kind, variant])


def _decode_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    pe, expected = np.asarray(case.inputs["pe"]), np.asarray(case.expected)
    found = _recognise(
        got, _DECODE_SLIPS, lambda v: _decode_variant(pe, v), _decode_text, max_slips=2
    )
    if found:
        return found
    if np.allclose(got, np.round(got)) and not np.allclose(expected, np.round(expected)):
        return [
            Finding(
                "your positions are whole numbers, while the encoded ones lie between "
                "integers: a table of encodings at whole positions cannot give them back",
                "the encoding is defined at every real position: read the position off its "
                "angles rather than search a table",
            )
        ]
    nonzero = np.abs(expected) > 1e-9
    if nonzero.any():
        ratio = got[nonzero] / expected[nonzero]
        if np.allclose(ratio, ratio[0], rtol=1e-6) and not np.isclose(ratio[0], 1):
            return [
                Finding(
                    msg(
                        "your positions are the true ones times {ratio:.6g}: the frequency you "
                        "divided by is not that of the pair you read",
                        ratio=ratio[0],
                    ),
                    "recompute the frequency of the pair you read from its pair index, as "
                    "the encoding defines it",
                )
            ]
    return []


def _encode(positions: np.ndarray, d: int) -> np.ndarray:
    """Rows of the sinusoidal encoding (interleaved) at any real positions: (..., d)."""
    angles = np.asarray(positions, dtype=np.float64)[..., None] * 10000.0 ** (
        -np.arange(0, d, 2) / d
    )
    pe = np.empty((*angles.shape[:-1], d))
    pe[..., 0::2], pe[..., 1::2] = np.sin(angles), np.cos(angles)
    return pe


def check_position_from_encoding(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's decoder of the sinusoidal encoding: from a row back to its position.

    Parameters
    ----------
    fn : callable
        ``fn(pe) -> positions``: ``pe`` of shape ``(..., d_model)`` holds rows of the
        sinusoidal encoding of chapter 4 (interleaved layout, ``d_model`` even) at real
        positions ``p`` with ``0 <= p`` below the wavelength of its slowest pair; the
        function returns the positions, of shape ``(...)``, and leaves ``pe`` unchanged.
    hint : bool, default False
        Show the fuller hint under the failures.

    Returns
    -------
    CheckReport
        Truthy iff every case gives back the positions it encoded (integers, positions
        between integers, positions past half a turn of the slowest pair, a batch, and
        ``d_model`` of 2, 8, 16 and 128). The report recognises the fastest pair read in
        place of a slow one, the concatenated layout, sine and cosine swapped, the arcsine
        or the arccosine of one coordinate, angles left in (-π, π], a wrong frequency and
        an angle returned as a position, alone or two together.

    Examples
    --------
    The arcsine of the first coordinate, a typical wrong answer:

    >>> import numpy as np
    >>> from helpers.checks import check_position_from_encoding
    >>> def from_the_first_sine(pe):
    ...     return np.arcsin(pe[..., 0])
    >>> report = check_position_from_encoding(from_the_first_sine)
    >>> bool(report)
    False
    >>> print(report.failures[0].problem.split(":")[0])
    the arcsine of the sine alone is right only while the angle stays within a quarter turn
    """
    rng = np.random.default_rng(41)
    batch = np.round(rng.uniform(0, 15000, size=(2, 3)), 2)
    layouts = [
        ("positions 0 to 9, d_model = 8", np.arange(10.0), 8),
        ("positions between integers, d_model = 8", np.array([0.5, 2.25, 7.75, 31.125]), 8),
        (
            "past half a turn of the slowest pair, d_model = 8",
            np.array([1000.0, 3200.5, 4500.0, 6000.0]),
            8,
        ),
        ("a batch of shape (2, 3), d_model = 16", batch, 16),
        ("far positions, d_model = 128", np.array([3.0, 12345.5, 40000.0, 54000.0]), 128),
        ("a single pair, d_model = 2", np.array([0.0, 1.0, 3.0, 6.0]), 2),
    ]
    specs = [
        _Spec(
            Case(name, {"pe": _encode(p, d)}, p, _DECODE_HINT),
            lambda *arrays: arrays,
            msg(
                "pe: {value}, the encodings of positions {positions}",
                value=(*p.shape, d),
                positions=", ".join(f"{v:g}" for v in p.ravel()),
            ),
            _decode_diagnose,
        )
        for name, p, d in layouts
    ]
    return _run(
        fn,
        "check_position_from_encoding",
        specs,
        see=section(4, "Sinusoidal encodings"),
        more=_DECODE_MORE,
        hint=hint,
    )
