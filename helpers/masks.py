"""Introduced in chapter 2, attention masks.

A mask says which keys each query may look at. The book has one convention (see
``book/notation.md``), the same as the boolean ``attn_mask`` of PyTorch's
``scaled_dot_product_attention``: a boolean array broadcastable to ``(..., n, m)``
in which ``mask[..., i, j]`` is True when query ``i`` **may attend** to key ``j``.

Masks combine with ``&`` (a query may attend to a key only if every mask allows it):
``causal_mask(n) & padding_mask(lengths, n)`` is the usual decoder mask of a padded
batch, shape ``(b, n, n)``.
"""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer

__all__ = ["causal_mask", "padding_mask"]


def _length(value: object, name: str) -> int:
    """``value`` as a non-negative Python int; TypeError/ValueError naming ``name`` otherwise."""
    return as_integer(value, name, minimum=0)


def causal_mask(
    n: int, m: int | None = None, *, offset: int | None = None
) -> npt.NDArray[np.bool_]:
    r"""Boolean causal mask: each query may attend to its own and earlier positions.

    Parameters
    ----------
    n : int
        Number of queries (rows).
    m : int, optional
        Number of keys (columns); defaults to ``n`` (self-attention).
    offset : int, optional
        Position, among the keys, of the first query: query ``i`` may attend to key
        ``j`` iff ``j <= i + offset``. Defaults to ``m - n``, which places the ``n``
        queries at the *last* ``n`` of the ``m`` positions (bottom-right alignment).
        ``offset=0`` gives top-left alignment, PyTorch's ``is_causal=True``.

    Returns
    -------
    mask : (n, m) ndarray of bool
        ``mask[i, j] = j <= i + offset``; True means *may attend*. It broadcasts
        against ``(..., n, m)`` scores of any batch shape.

    Raises
    ------
    TypeError
        If ``n``, ``m`` or ``offset`` is not an integer.
    ValueError
        If ``n`` or ``m`` is negative.

    See Also
    --------
    padding_mask, helpers.attention.scaled_dot_product_attention

    Notes
    -----
    For ``n == m`` both alignments agree: the lower triangle including the diagonal,

    .. math::

        M_{ij} = [\, j \le i \,], \qquad
        \text{additive form } \; B_{ij} = 0 \text{ if } j \le i \text{ else } -\infty .

    For ``m > n`` the default is bottom-right, the alignment of generation with a
    key/value cache: the ``m - n`` keys before the queries are past tokens that every
    query may see, and the last query sees all ``m`` keys. This is PyTorch's
    ``torch.nn.attention.bias.causal_lower_right``; PyTorch's ``is_causal=True`` is
    top-left instead (query ``i`` sees keys ``0..i`` whatever ``m`` is). For ``n > m``
    bottom-right alignment leaves the first ``n - m`` queries with no key at all
    (see :func:`~helpers.attention.scaled_dot_product_attention` for what such a
    fully masked row gives).

    Examples
    --------
    >>> from helpers.masks import causal_mask
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4).astype(int)  # 2 new queries after 2 cached tokens
    array([[1, 1, 1, 0],
           [1, 1, 1, 1]])
    >>> causal_mask(2, 4, offset=0).astype(int)  # top-left, PyTorch's is_causal
    array([[1, 0, 0, 0],
           [1, 1, 0, 0]])
    """
    n = _length(n, "n")
    m = n if m is None else _length(m, "m")
    if offset is None:
        offset = m - n
    elif isinstance(offset, (bool, np.bool_)):
        raise TypeError(f"offset must be an integer, got {offset!r}")
    else:
        try:
            offset = operator.index(offset)
        except TypeError:
            raise TypeError(f"offset must be an integer, got {offset!r}") from None
    i = np.arange(n)[:, None]  # (n, 1)
    j = np.arange(m)[None, :]  # (1, m)
    return j <= i + offset  # (n, m)


def padding_mask(lengths: npt.ArrayLike, m: int) -> npt.NDArray[np.bool_]:
    """Boolean mask hiding the padding at the end of each sequence of a batch.

    Parameters
    ----------
    lengths : (...) array_like of int
        True length of each sequence, ``0 <= lengths <= m``; the keys at positions
        ``>= lengths`` are padding. A scalar gives a single sequence.
    m : int
        Padded length: the number of keys.

    Returns
    -------
    mask : (..., 1, m) ndarray of bool
        ``mask[..., 0, j] = j < lengths[...]``. The axis of length 1 stands for the
        queries, so the mask broadcasts against scores ``(..., n, m)`` for any
        number of queries ``n``: every query of a sequence sees that sequence's real
        keys. For scores with more axes, such as heads ``(b, h, n, m)``, insert the
        missing axis: ``padding_mask(lengths, m)[:, None]`` has shape ``(b, 1, 1, m)``.

    Raises
    ------
    TypeError
        If ``lengths`` is not integer-valued or ``m`` is not an integer.
    ValueError
        If a length is negative or larger than ``m``.

    See Also
    --------
    causal_mask

    Notes
    -----
    Only keys are masked. A padded *query* still attends to the real keys and gives
    some output; that output is ignored later (by the loss or by pooling over real
    tokens), so masking it as well is unnecessary. A sequence of length 0 masks every
    key: its rows are fully masked.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.masks import padding_mask
    >>> padding_mask([3, 1], 4).astype(int)  # two sequences padded to length 4
    array([[[1, 1, 1, 0]],
    <BLANKLINE>
           [[1, 0, 0, 0]]])
    >>> padding_mask([3, 1], 4).shape
    (2, 1, 4)
    """
    m = _length(m, "m")
    lens = np.asarray(lengths)
    if lens.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, got dtype {lens.dtype}")
    if lens.size and (lens.min() < 0 or lens.max() > m):
        raise ValueError(
            f"lengths must lie in [0, m] = [0, {m}], got values from {int(lens.min())} to "
            f"{int(lens.max())} (lengths.shape = {lens.shape})"
        )
    j = np.arange(m)  # (m,)
    return (j < lens[..., None])[..., None, :]  # (..., 1, m)
