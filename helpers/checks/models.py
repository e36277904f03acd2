"""Self-checks of chapter 7 (BERT, GPT, mixture of experts), built on :mod:`helpers.checks.core`.

Each check runs the reader's function on small inputs, compares with the reference in
:mod:`helpers.models` or :mod:`helpers.moe`, and recognises the usual slips by
recomputing the answer with each slip and naming the one that reproduces the reader's
numbers: gates that are not renormalised over the top ``k``, a balancing loss that
counts the ``k`` choices of a token without dividing by ``k``, BERT's corruption that
masks every selected token, a temperature that multiplies the logits, ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from helpers.checks.core import Case, CheckReport, Finding, run_checks, section
from helpers.i18n import localize, msg
from helpers.models import IGNORE_INDEX, beam_search, next_token_distribution
from helpers.moe import load_balancing_loss, top_k_gating
from helpers.softmax import softmax

__all__ = [
    "check_beam_search",
    "check_load_balancing_loss",
    "check_mlm_corruption",
    "check_next_token_distribution",
    "check_top_k_gating",
]

_SLIP_RTOL, _SLIP_ATOL = 1e-6, 1e-9


def _close(got: np.ndarray, candidate: np.ndarray) -> bool:
    candidate = np.asarray(candidate, dtype=np.float64)
    return bool(
        got.shape == candidate.shape
        and np.allclose(got, candidate, rtol=_SLIP_RTOL, atol=_SLIP_ATOL, equal_nan=True)
    )


def _recognise(got: np.ndarray, slips: Sequence[tuple[np.ndarray, Finding]]) -> list[Finding]:
    return [finding for candidate, finding in slips if _close(got, candidate)][:1]


def _require_callable(fn: object, check_name: str) -> None:
    run_checks(fn, (), check_name=check_name)  # type: ignore[arg-type]


def _first(result: object) -> object:
    return result[0] if isinstance(result, tuple) else result


# ---------------------------------------------------------------------------
# Top-k gating
# ---------------------------------------------------------------------------


def _topk_slips(h: np.ndarray, k: int) -> list[tuple[np.ndarray, Finding]]:
    p = softmax(h)
    _, idx = top_k_gating(h, k)
    sel = np.zeros(h.shape, bool)
    np.put_along_axis(sel, idx, True, -1)
    _, idx_small = top_k_gating(-h, k)  # the k smallest logits
    small = np.zeros(h.shape, bool)
    np.put_along_axis(small, idx_small, True, -1)
    return [
        (
            softmax(np.where(small, h, -np.inf)),
            Finding(
                "the k SMALLEST logits were selected (an ascending sort read from the front): "
                "the router must pick the experts it scores highest",
                "the router keeps the experts with the largest logits",
            ),
        ),
        (
            np.where(sel, p, 0.0),
            Finding(
                "the gates are the full softmax's values at the top k, not renormalised: "
                "they sum to less than 1",
                "the gates of a token sum to 1",
            ),
        ),
        (
            p,
            Finding(
                "every expert keeps its softmax weight: nothing outside the top k was zeroed",
                "a gate outside the top k is exactly 0",
            ),
        ),
        (
            sel / k,
            Finding(
                "the selected experts get equal gates 1/k: the gates must depend on the logits",
                "a larger logit gets a larger gate",
            ),
        ),
    ]


def check_top_k_gating(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(router_logits, k) -> gates`` (``(..., E)``, or a tuple starting with it).

    The gates must be zero outside each row's ``k`` largest logits and equal to the
    softmax of those ``k`` logits (Shazeer et al. 2017, Mixtral); ``k`` arrives as a
    Python int. ``hint=True`` adds a fuller hint to a failing report. Recognised slips:
    the ``k`` smallest logits selected, no renormalisation, no zeroing, equal gates
    ``1/k``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_top_k_gating
    >>> def first_k(router_logits, k):  # the first k experts, whatever the logits
    ...     gates = np.zeros(np.shape(router_logits))
    ...     gates[..., :k] = 1 / k
    ...     return gates
    >>> check_top_k_gating(first_k).status
    'failed'
    """
    _require_callable(fn, "check_top_k_gating")

    @functools.wraps(fn)
    def call(router_logits: np.ndarray, k: np.ndarray) -> object:
        return _first(fn(router_logits, int(k)))

    raw = [
        (
            "one token, k = 2",
            np.array([1.0, 3.0, 0.0, 2.0]),
            2,
            "the experts with logits 3 and 2 are kept, the others get 0; the two gates sum to 1",
        ),
        (
            "a batch of tokens, k = 2",
            np.array([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]]),
            2,
            "each token keeps its own two experts",
        ),
        (
            "k = 1 (one expert, gate 1)",
            np.array([[0.3, 1.2, -0.4, 0.0]]),
            1,
            "one expert kept: its gate is 1",
        ),
        ("k = N: the plain softmax", np.array([[1.0, 2.0, 3.0]]), 3, "every expert kept"),
        (
            "large logits",
            np.array([[1000.0, 999.0, -1000.0, 0.0]]),
            2,
            'logits near 1000: the gates are finite (chapter 1, "Computing softmax without '
            'overflow")',
        ),
    ]
    cases = [
        Case(name, {"router_logits": h, "k": np.array(k)}, top_k_gating(h, k)[0], hint=text)
        for name, h, k, text in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        h, k = case.inputs["router_logits"], int(case.inputs["k"])
        return _recognise(got, _topk_slips(h, k))

    return run_checks(
        call,
        cases,
        check_name="check_top_k_gating",
        diagnose=diagnose,
        see=section(7, "Top-k gating"),
        more="choose each token's k experts from its logits, then make their gates a "
        "distribution over those k alone, as a softmax would over their logits; every other "
        "expert gets exactly 0",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# The load-balancing loss
# ---------------------------------------------------------------------------


def check_load_balancing_loss(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(router_probs, expert_indices, num_experts) -> float``: ``N Σ f_i P_i``.

    ``f_i`` is the fraction of the ``k T`` token-to-expert assignments that go to expert
    ``i`` and ``P_i`` the mean router probability of expert ``i``; ``num_experts``
    arrives as a Python int. ``hint=True`` adds a fuller hint to a failing report.
    Recognised slips: counting the ``k`` choices without dividing by ``k`` (Hugging
    Face's convention, ``k`` times larger), forgetting the factor ``N``, ``f`` computed
    from the probabilities (``N Σ P_i²``).

    Examples
    --------
    >>> from helpers.checks import check_load_balancing_loss
    >>> def always_balanced(router_probs, expert_indices, num_experts):  # no measurement
    ...     return 1.0
    >>> [r.name for r in check_load_balancing_loss(always_balanced).results if r.passed]
    ['uniform router: 1']
    """
    _require_callable(fn, "check_load_balancing_loss")

    @functools.wraps(fn)
    def call(router_probs: np.ndarray, expert_indices: np.ndarray, num_experts: np.ndarray):
        return fn(router_probs, expert_indices, int(num_experts))

    p4 = softmax(np.array([[2.0, 0.0, 0.0, -1.0], [1.0, 1.5, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0]]))
    p3 = softmax(np.array([[1.0, 0.0, -1.0], [0.5, 0.0, 2.0], [0.0, 1.0, 0.0], [2.0, 1.0, 0.0]]))
    raw = [
        (
            "k = 1, three tokens",
            p4,
            np.array([[0], [1], [2]]),
            4,
            "three tokens, one expert each, four experts: expert 3 gets no token",
        ),
        (
            "k = 2, four tokens",
            p3,
            np.argsort(-p3, axis=-1)[:, :2],
            3,
            "four tokens sent to two experts each: eight assignments",
        ),
        (
            "uniform router: 1",
            np.full((4, 2), 0.5),
            np.array([[0], [1], [1], [0]]),
            2,
            "perfectly balanced routing gives 1, whatever the number of experts",
        ),
        (
            "collapse: N",
            np.tile([1.0, 0.0, 0.0], (3, 1)),
            np.zeros((3, 1), int),
            3,
            "every token sent to expert 0 with probability 1: the loss's largest value, N",
        ),
    ]
    cases = [
        Case(
            name,
            {"router_probs": p, "expert_indices": idx, "num_experts": np.array(E)},
            np.array(load_balancing_loss(p, idx, E)),
            hint=text,
        )
        for name, p, idx, E, text in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        p = case.inputs["router_probs"]
        idx = case.inputs["expert_indices"]
        E = int(case.inputs["num_experts"])
        k = idx.shape[-1]
        ref = load_balancing_loss(p, idx, E)
        P = p.mean(axis=0)
        slips = [
            (
                np.array(k * ref),
                Finding(
                    "the loss is k times too large: the k choices of each token were counted "
                    "without dividing by k (Hugging Face's Mixtral convention)",
                    "the fractions f_i sum to 1 over the experts",
                ),
            ),
            (
                np.array(ref / E),
                Finding(
                    "the factor N (the number of experts) is missing",
                    "perfectly balanced routing gives 1, whatever the number of experts",
                ),
            ),
            (
                np.array(E * float(P @ P)),
                Finding(
                    "f was computed from the probabilities: this is N Σ P_i², not N Σ f_i P_i",
                    "f_i counts the assignments in expert_indices",
                ),
            ),
        ]
        if k == 1:
            return _recognise(got, slips[1:])  # for k = 1 the first slip is the answer
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_load_balancing_loss",
        diagnose=diagnose,
        see=section(7, "The load-balancing loss"),
        more="f says where the tokens were sent (count the assignments in expert_indices), "
        "P what the router wanted (average router_probs over the tokens); both are "
        "fractions over the experts. The loss combines them expert by expert and is scaled "
        "so that balanced routing gives 1",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# BERT's masked-language-model corruption
# ---------------------------------------------------------------------------


def _mlm_reference(
    ids: np.ndarray,
    u_select: np.ndarray,
    u_kind: np.ndarray,
    random_ids: np.ndarray,
    mask_id: int,
    *,
    p_mask: float = 0.8,
    p_random: float = 0.1,
    labels_everywhere: bool = False,
) -> np.ndarray:
    selected = u_select < 0.15
    corrupted = ids.copy()
    corrupted[selected & (u_kind < p_mask)] = mask_id
    swap = selected & (u_kind >= p_mask) & (u_kind < p_mask + p_random)
    corrupted[swap] = random_ids[swap]
    labels = ids.copy() if labels_everywhere else np.where(selected, ids, IGNORE_INDEX)
    return np.stack([corrupted, labels])


def check_mlm_corruption(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(input_ids, u_select, u_kind, random_ids, mask_token_id)``.

    It must return ``(corrupted, labels)``: token ``t`` is selected when
    ``u_select[t] < 0.15``; a selected token becomes ``mask_token_id`` when ``u_kind[t] <
    0.8``, ``random_ids[t]`` when ``0.8 <= u_kind[t] < 0.9``, and stays itself otherwise;
    ``labels`` is the original token where selected and ``-100`` elsewhere. Recognised
    slips: every selected token masked (no 80/10/10), labels at every position, the
    80% [MASK] and 10% random branches exchanged, the random and keep branches exchanged.
    ``mask_token_id`` arrives as a Python int; ``hint=True`` adds a fuller hint to a
    failing report.

    Examples
    --------
    >>> from helpers.checks import check_mlm_corruption
    >>> def untouched(input_ids, u_select, u_kind, random_ids, mask_token_id):
    ...     return input_ids, input_ids  # nothing corrupted, every label kept
    >>> check_mlm_corruption(untouched).status
    'failed'
    """
    _require_callable(fn, "check_mlm_corruption")

    @functools.wraps(fn)
    def call(input_ids, u_select, u_kind, random_ids, mask_token_id):
        result = fn(input_ids, u_select, u_kind, random_ids, int(mask_token_id))
        if isinstance(result, tuple) and len(result) == 2:
            return np.stack([np.asarray(result[0]), np.asarray(result[1])])
        return result

    ids = np.array([11, 12, 13, 14, 15, 16, 17, 18])
    u_sel = np.array([0.05, 0.50, 0.10, 0.14, 0.90, 0.01, 0.15, 0.30])
    u_kind = np.array([0.10, 0.20, 0.85, 0.95, 0.50, 0.79, 0.10, 0.99])
    rand = np.array([40, 41, 42, 43, 44, 45, 46, 47])
    batch_ids = np.array([[5, 6, 7], [8, 9, 10]])
    raw = [
        (
            "eight tokens, all three kinds",
            ids,
            u_sel,
            u_kind,
            rand,
            3,
            "tokens 0, 2, 3 and 5 are selected (u_select < 0.15), and among them each of "
            "the three kinds occurs",
        ),
        (
            "nothing selected",
            ids,
            np.full(8, 0.5),
            u_kind,
            rand,
            3,
            "no token is selected: the input comes back unchanged, and the loss sees nothing",
        ),
        (
            "a batch of two sequences",
            batch_ids,
            np.array([[0.1, 0.9, 0.0], [0.12, 0.2, 0.05]]),
            np.array([[0.5, 0.5, 0.85], [0.95, 0.1, 0.2]]),
            np.array([[30, 31, 32], [33, 34, 35]]),
            1,
            "the same rule on a batch, token by token",
        ),
    ]
    cases = [
        Case(
            name,
            {
                "input_ids": i,
                "u_select": us,
                "u_kind": uk,
                "random_ids": r,
                "mask_token_id": np.array(m),
            },
            _mlm_reference(i, us, uk, r, m),
            hint=text,
        )
        for name, i, us, uk, r, m, text in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        args = [case.inputs[k] for k in ("input_ids", "u_select", "u_kind", "random_ids")]
        m = int(case.inputs["mask_token_id"])
        slips = [
            (
                _mlm_reference(*args, m, p_mask=1.0, p_random=0.0),
                Finding(
                    "every selected token became [MASK]: BERT masks 80%, replaces 10% by a "
                    "random token and keeps 10%",
                    "u_kind decides which of the three things happens to a selected token",
                ),
            ),
            (
                _mlm_reference(*args, m, labels_everywhere=True),
                Finding(
                    "labels are set at every position: the loss would also train the model to "
                    "copy the tokens it can see",
                    "the loss sees the selected tokens only",
                ),
            ),
            (
                _mlm_reference(*args, m, p_mask=0.1, p_random=0.8),
                Finding(
                    "the 80% and 10% branches are exchanged: 10% of the selected tokens became "
                    "[MASK] and 80% a random token",
                    "reread the statement's thresholds of u_kind, branch by branch",
                ),
            ),
            (
                _swap_branches(*args, m),
                Finding(
                    "the random and the unchanged branches are exchanged (u_kind >= 0.9 should "
                    "keep the token)",
                    "reread the statement's thresholds of u_kind, branch by branch",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_mlm_corruption",
        diagnose=diagnose,
        see=section(7, "The masked-language-model objective"),
        more="decide first, token by token, whether it is selected; then, for the selected "
        "ones only, which of the three things happens, from u_kind; the labels follow the "
        "selection alone",
        hint=hint,
    )


def _swap_branches(ids, u_select, u_kind, random_ids, mask_id) -> np.ndarray:
    selected = u_select < 0.15
    corrupted = ids.copy()
    corrupted[selected & (u_kind < 0.8)] = mask_id
    swap = selected & (u_kind >= 0.9)
    corrupted[swap] = random_ids[swap]
    return np.stack([corrupted, np.where(selected, ids, IGNORE_INDEX)])


# ---------------------------------------------------------------------------
# The next-token distribution: temperature and top-k
# ---------------------------------------------------------------------------


def check_next_token_distribution(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(logits, temperature, top_k) -> probs``: softmax(z / τ) over the top ``k``.

    ``top_k=None`` keeps every token; ``temperature`` arrives as a Python float and
    ``top_k`` as a Python int or None. ``hint=True`` adds a fuller hint to a failing
    report. Recognised slips: the temperature multiplying the logits, dividing the
    probabilities by the temperature, top-``k`` applied after the softmax without
    renormalising, ``k - 1`` or ``k + 1`` tokens kept.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_next_token_distribution
    >>> def greedy(logits, temperature, top_k):  # all the probability on the largest logit
    ...     return (logits == logits.max(axis=-1, keepdims=True)).astype(float)
    >>> check_next_token_distribution(greedy).status
    'failed'
    """
    _require_callable(fn, "check_next_token_distribution")

    @functools.wraps(fn)
    def call(logits: np.ndarray, temperature: np.ndarray, top_k: np.ndarray) -> object:
        k = int(top_k)
        return fn(logits, float(temperature), None if k == 0 else k)

    raw = [
        (
            "τ = 1, every token",
            np.array([2.0, 1.0, 0.5, -1.0]),
            1.0,
            0,
            "τ = 1 and no truncation: the plain softmax of the logits",
        ),
        (
            "τ = 0.5, every token",
            np.array([2.0, 1.0, 0.5, -1.0]),
            0.5,
            0,
            "τ = 0.5 sharpens the distribution: the largest logit's probability grows",
        ),
        (
            "τ = 2, top 2",
            np.array([[0.0, 3.0, 1.0, 2.0], [1.0, -1.0, 0.5, 0.0]]),
            2.0,
            2,
            "two tokens kept per row, the others at exactly 0; τ = 2 flattens the two",
        ),
        (
            "τ = 0.8, top 3 of 5",
            np.array([0.3, -0.2, 1.7, 0.9, 1.1]),
            0.8,
            3,
            "three of five tokens kept; their probabilities sum to 1",
        ),
        (
            "large logits, τ = 0.1",
            np.array([500.0, 499.0, -500.0]),
            0.1,
            2,
            'logits of 500 at τ = 0.1: the probabilities are finite (chapter 1, "Computing '
            'softmax without overflow")',
        ),
    ]
    cases = [
        Case(
            msg("{name} (top_k = {value})", name=name, value=k or "None"),
            {"logits": z, "temperature": np.array(t), "top_k": np.array(k)},
            next_token_distribution(z, temperature=t, top_k=k or None),
            hint=text,
        )
        for name, z, t, k, text in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        z = case.inputs["logits"]
        t = float(case.inputs["temperature"])
        k = int(case.inputs["top_k"]) or None
        V = z.shape[-1]
        slips = [
            (
                next_token_distribution(z * t * t, temperature=t, top_k=k),
                Finding(
                    "the logits were multiplied by τ instead of divided by it",
                    "a small τ sharpens the distribution, a large one flattens it",
                ),
            )
        ]
        p_plain = softmax(z)
        if k is not None and k < V:
            keep = next_token_distribution(z, temperature=t, top_k=k) > 0
            slips.append(
                (
                    np.where(keep, softmax(z / t), 0.0),
                    Finding(
                        "the tokens outside the top k were zeroed after the softmax without "
                        "renormalising: the probabilities sum to less than 1",
                        "the kept tokens' probabilities sum to 1",
                    ),
                )
            )
            for kk, what in ((k - 1, "k - 1"), (k + 1, "k + 1")):
                if 1 <= kk <= V:
                    slips.append(
                        (
                            next_token_distribution(z, temperature=t, top_k=kk),
                            Finding(
                                msg("{what} tokens were kept instead of k", what=what),
                                "keep exactly k tokens per row",
                            ),
                        )
                    )
        if t != 1:
            slips.append(
                (
                    p_plain / t,
                    Finding(
                        "the probabilities were divided by τ: the temperature divides the "
                        "logits, before the softmax",
                        "the result is a probability distribution: it sums to 1",
                    ),
                )
            )
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_next_token_distribution",
        diagnose=diagnose,
        see=section(7, "Sampling: temperature and top-k"),
        more="two changes of the logits, then one softmax: the temperature rescales them and "
        "the truncation removes all but the k largest. Make the removed tokens end with "
        "probability exactly 0 and the kept ones sum to 1, and keep the softmax finite for "
        "large logits",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# Beam search
# ---------------------------------------------------------------------------


class _NextTokenTable:
    """``next_log_probs`` of a model whose next token depends on the last two tokens:
    ``table[a, b]`` holds the log-probabilities after ``a, b``. It is plain data as well
    (``wire``), so a grader can rebuild the same function in another process
    (scripts/grade_wire.py) without sending code."""

    __name__ = "next_log_probs"

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.asarray(table, dtype=np.float64)  # (V, V, V)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens)
        if tokens.ndim != 2:
            raise ValueError(
                localize(
                    msg(
                        "next_log_probs takes the beams as one array of shape (beams, t), got "
                        "shape {tokens_shape}",
                        tokens_shape=tokens.shape,
                    )
                )
            )
        return self.table[tokens[:, -2], tokens[:, -1]]  # (beams, V)

    def wire(self) -> tuple[str, np.ndarray]:
        return "last-two-tokens table", self.table


def _table_fn(table: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``next_log_probs`` of a model whose next token depends on the last two tokens."""
    return _NextTokenTable(table)


_BEAM_SLIPS = (
    "greedy",  # the beam width ignored
    "last step only",  # extensions ranked by the new token's log-probability
    "probabilities",  # scores returned as probabilities
    "no normalisation",  # finished hypotheses compared by their sums
    "prompt counted",  # the length that normalises includes the prompt
    "end token not counted",  # ... leaves out the end token
    "continued",  # a hypothesis that added the end token is extended further
    "finished dropped",  # a hypothesis that ended before the last step is lost
    "beam shrinks",  # the beam is not refilled when a hypothesis ends
    "every end token",  # an end token outside the beam_width best extensions finishes
    "no early stop",  # the search goes on after beam_width hypotheses have ended
)


def _beam_row(
    table: np.ndarray,
    prompt: np.ndarray,
    T: int,
    w: int,
    eos: int | None = None,
    alpha: float = 1.0,
    slip: str | None = None,
) -> np.ndarray:
    """Beam search written plainly, with one usual slip (or none); returns what the check
    compares: the best hypothesis, padded with the end token to ``n0 + T`` tokens, then
    its score."""
    f = _table_fn(table)
    n0, pad = len(prompt), 0 if eos is None else eos
    live = [(list(map(int, prompt)), 0.0)]  # (tokens, summed log-probability)
    done: list[tuple[list[int], float, float]] = []  # (tokens, score, what ranks it)
    ending = eos is not None and slip != "continued"
    for t in range(1, T + 1):
        logp = f(np.array([seq for seq, _ in live]))
        rank = logp if slip == "last step only" else logp + np.array([s for _, s in live])[:, None]
        order = np.argsort(-rank.ravel(), kind="stable")
        extensions = [
            (live[b][0] + [int(tok)], live[b][1] + float(logp[b, tok]))
            for b, tok in zip(*np.divmod(order, logp.shape[1]), strict=True)
        ]
        width = 1 if slip == "greedy" else w
        ends = [(ending and seq[-1] == eos) or t == T for seq, _ in extensions]
        finishing = [
            i
            for i, end in enumerate(ends)
            if end
            and (i < width or (slip == "every end token" and extensions[i][0][-1] == eos))
            and (slip != "finished dropped" or t == T)
        ]
        for i in finishing:
            seq, total = extensions[i]
            key = -float(rank.ravel()[order[i]]) if slip == "last step only" else None
            L = (
                t + n0
                if slip == "prompt counted"
                else t - 1
                if slip == "end token not counted"
                else t
            )
            a = 0.0 if eos is None or slip == "no normalisation" else alpha
            with np.errstate(divide="ignore", invalid="ignore"):
                score = total / np.float64(L) ** a if a else total
            done.append((seq, score, -score if key is None else key))
        done = sorted(done, key=lambda d: d[2])[:width]  # stable: the first finished first
        if t == T or (len(done) == width and slip != "no early stop" and ending):
            break
        candidates = range(
            min(width, len(extensions)) if slip == "beam shrinks" else len(extensions)
        )
        live = [extensions[i] for i in candidates if not ends[i]][:width]
        if not live:
            break
    if not done:  # no hypothesis (cannot happen with one end token and V >= 2)
        return np.full(n0 + T + 1, np.nan)
    seq, score, _ = done[0]
    if slip == "probabilities":
        score = float(np.exp(score))
    row = np.full(n0 + T + 1, float(pad))
    row[: len(seq)], row[-1] = seq, score
    return row


def _beam_case_row(
    table: np.ndarray, prompt: np.ndarray, T: int, w: int, eos: int | None, alpha: float
) -> np.ndarray:
    """The compared row of the reference (:func:`helpers.models.beam_search`)."""
    kwargs = {} if eos is None else {"eos_id": eos, "length_penalty": alpha}
    tokens, scores = beam_search(_table_fn(table), prompt, T, beam_width=w, **kwargs)
    row = np.full(len(prompt) + T + 1, float(0 if eos is None else eos))
    row[: tokens.shape[1]], row[-1] = tokens[0], scores[0]
    return row


def _beam_table(seed: int, V: int) -> np.ndarray:
    z = np.random.default_rng(seed).normal(scale=2.0, size=(V, V, V))
    return z - np.log(np.exp(z).sum(-1, keepdims=True))  # log-probabilities


def _beam_cases() -> list[Case]:
    """The cases of :func:`check_beam_search` (a table of next-token log-probabilities given
    the last two tokens, a prompt, ``num_tokens``, ``beam_width`` and, for five, an end token
    and a length penalty)."""
    raw = [  # name, table, prompt, num_tokens, beam_width, eos_id, length_penalty
        ("V = 3, 3 tokens, width 2", _beam_table(81, 3), np.array([0, 1]), 3, 2, None, 1.0),
        ("V = 4, 4 tokens, width 3", _beam_table(96, 4), np.array([2, 3]), 4, 3, None, 1.0),
        ("width 1: greedy", _beam_table(82, 5), np.array([1, 4]), 3, 1, None, 1.0),
        ("width V**(T-1): exact", _beam_table(87, 3), np.array([0, 0]), 3, 9, None, 1.0),
        ("end token 3, α = 1, V = 5", _beam_table(732, 5), np.array([3, 2]), 5, 3, 3, 1.0),
        ("end token 4, α = 0 (plain sums)", _beam_table(528, 5), np.array([4, 3]), 5, 2, 4, 0.0),
        ("end token 2, α = 2", _beam_table(1046, 4), np.array([1, 1]), 5, 3, 2, 2.0),
        ("end token 0, α = 0.5", _beam_table(2226, 4), np.array([3, 1]), 4, 2, 0, 0.5),
        ("end token 1, α = 1, V = 4", _beam_table(788, 4), np.array([0, 3]), 5, 2, 1, 1.0),
    ]
    cases = []
    for name, t, prompt, T, w, eos, alpha in raw:
        inputs = {
            "table": t,
            "prompt_ids": prompt,
            "num_tokens": np.array(T),
            "beam_width": np.array(w),
        }
        if eos is not None:
            inputs |= {"eos_id": np.array(eos), "length_penalty": np.array(alpha)}
        cases.append(
            Case(
                name,
                inputs,
                _beam_case_row(t, prompt, T, w, eos, alpha),
                hint="print the running and the finished hypotheses after each step and "
                "follow this case by hand with the rules of the chapter's beam-search "
                "section",
            )
        )
    return cases


_BEAM_FINDINGS = {
    "greedy": Finding(
        "only the best extension is kept at each step: this is greedy decoding, the beam "
        "width is ignored",
        "keep the beam_width best of the extensions of all the running hypotheses",
    ),
    "last step only": Finding(
        "the extensions are ranked by the new token's log-probability alone; a sequence's "
        "score is the sum over all its added tokens",
        "rank an extension by the log-probability of its whole added sequence",
    ),
    "probabilities": Finding(
        "the scores are probabilities; they should be log-probabilities",
        "a score is a summed log-probability, the logarithm of a sequence's probability",
    ),
    "no normalisation": Finding(
        "the finished hypotheses are compared by their summed log-probabilities: the "
        "length_penalty was not applied, and plain sums favour short hypotheses",
        "with an end token, finished hypotheses are compared by length-normalised scores, "
        "as the chapter's beam-search section defines them",
    ),
    "prompt counted": Finding(
        "the length that normalises a score counts the prompt too",
        "the length counts only the tokens the hypothesis added, its end token included",
    ),
    "end token not counted": Finding(
        "the length that normalises a score leaves out the end token",
        "the length counts every token the hypothesis added, its end token included",
    ),
    "continued": Finding(
        "a hypothesis went on after its end token: a finished hypothesis was extended",
        "when an extension adds eos_id, the hypothesis is finished: set it aside and never "
        "extend it",
    ),
    "finished dropped": Finding(
        "a hypothesis that ended before the last step was lost: only those still running "
        "at num_tokens were compared",
        "set every hypothesis that ends aside, keeping the beam_width best, and compare it "
        "with those that end later",
    ),
    "beam shrinks": Finding(
        "when a hypothesis ended, the search went on with fewer than beam_width running hypotheses",
        "refill the beam: the beam_width best extensions that do not end run on",
    ),
    "every end token": Finding(
        "an extension ranked below the beam_width best finished a hypothesis because it "
        "added the end token",
        "only the beam_width best extensions of a step may finish; an end token ranked "
        "below them is discarded",
    ),
    "no early stop": Finding(
        "the search went on after beam_width hypotheses had ended",
        "stop as soon as beam_width hypotheses have finished",
    ),
}


def check_beam_search(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(next_log_probs, prompt_ids, num_tokens, beam_width, eos_id=None,
    length_penalty=1.0) -> (tokens, scores)``.

    Parameters
    ----------
    fn : callable
        The reader's beam search. ``next_log_probs(tokens)`` maps the running hypotheses,
        an int array ``(m, t)``, to the log-probabilities of the next token, ``(m, V)``;
        ``prompt_ids`` is an int array ``(n0,)``; ``num_tokens`` and ``beam_width`` arrive
        as Python ints. The cases without an end token call ``fn`` with these four
        arguments alone; the others also pass ``eos_id`` (a Python int) and
        ``length_penalty`` (a Python float) by keyword. ``fn`` returns the hypotheses
        ``(w, n0 + L)``, best first, shorter ones padded with ``eos_id`` after their end,
        and their scores ``(w,)``: summed log-probabilities of the added tokens, compared
        and returned length-normalised when there is an end token, by the rules of the
        chapter's section on beam search (ties broken by the lower beam, then the lower
        token).

    hint : bool, default False
        Show the fuller hint under the failures.

    Returns
    -------
    CheckReport

    Notes
    -----
    The report compares the best hypothesis and its score, shown as one row: its tokens,
    padded with the end token to ``n0 + num_tokens``, then the score. The models of the
    cases are tables of next-token probabilities given the last two tokens. Four cases
    have no end token (every hypothesis adds ``num_tokens``); five have one, with
    ``length_penalty`` (shown as α) 1, 0, 2, 0.5 and 1. No two slips give the same answer
    on a case where either is wrong, so each diagnosis names one slip. Recognised slips:
    the beam width ignored (greedy decoding), extensions ranked by the last step's
    log-probability, probabilities returned instead of log-probabilities; and with an end
    token: no length
    normalisation, a length that counts the prompt or leaves out the end token, a
    hypothesis extended after its end token, hypotheses that ended early dropped, a beam
    that is not refilled when a hypothesis ends, an end token outside the ``beam_width``
    best extensions finishing a hypothesis, and a search that goes on after
    ``beam_width`` hypotheses have ended.

    Examples
    --------
    A function that adds no token at all is caught:

    >>> import numpy as np
    >>> from helpers.checks import check_beam_search
    >>> def adds_nothing(
    ...     next_log_probs, prompt_ids, num_tokens, beam_width, eos_id=None, length_penalty=1.0
    ... ):
    ...     return np.asarray(prompt_ids)[None, :], np.zeros(1)
    >>> report = check_beam_search(adds_nothing)
    >>> report.status
    'failed'
    >>> print(report.message)
    V = 3, 3 tokens, width 2: expected shape (6,), got shape (3,)
    """
    _require_callable(fn, "check_beam_search")

    @functools.wraps(fn)
    def call(
        table: np.ndarray,
        prompt_ids: np.ndarray,
        num_tokens: np.ndarray,
        beam_width: np.ndarray,
        eos_id: np.ndarray | None = None,
        length_penalty: np.ndarray | None = None,
    ) -> object:
        T, extra = int(num_tokens), {}
        if eos_id is not None:
            extra = {"eos_id": int(eos_id), "length_penalty": float(length_penalty)}
        result = fn(_table_fn(table), prompt_ids, T, int(beam_width), **extra)
        if not (isinstance(result, tuple) and len(result) == 2):
            return result  # the report says what came back
        tokens, scores = (np.asarray(r) for r in result)
        if tokens.ndim != 2 or scores.ndim != 1 or not len(tokens) or not len(scores):
            return tokens  # reported as a shape mismatch
        best = tokens[0]
        if eos_id is not None and best.size < len(prompt_ids) + T:  # a short best
            best = np.append(best, np.full(len(prompt_ids) + T - best.size, int(eos_id)))
        return np.append(best.astype(np.float64), scores[0])  # the best, then its score

    cases = _beam_cases()

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        inputs = case.inputs
        eos = int(inputs["eos_id"]) if "eos_id" in inputs else None
        alpha = float(inputs["length_penalty"]) if "length_penalty" in inputs else 1.0
        args = (
            inputs["table"],
            inputs["prompt_ids"],
            int(inputs["num_tokens"]),
            int(inputs["beam_width"]),
            eos,
            alpha,
        )
        slips = []
        for slip in _BEAM_SLIPS:
            candidate = _beam_row(*args, slip=slip)
            if not _close(case.expected, candidate):
                slips.append((candidate, _BEAM_FINDINGS[slip]))
        found = _recognise(got, slips)
        if not found and eos is not None:
            n = len(inputs["prompt_ids"])
            end = np.flatnonzero(case.expected[n:-1] == eos)
            stop = n + (end[0] + 1 if end.size else len(case.expected) - 1 - n)
            if np.allclose(got[:stop], case.expected[:stop]) and _close(
                got[-1:], case.expected[-1:]
            ):
                found = [
                    Finding(
                        "the best hypothesis and its score are right, but the places after "
                        "its end token do not hold eos_id",
                        "pad a hypothesis shorter than the longest with eos_id after its end",
                    )
                ]
        return found

    return run_checks(
        call,
        cases,
        check_name="check_beam_search",
        diagnose=diagnose,
        see=section(7, "Training with teacher forcing, decoding with beam search"),
        more=_BEAM_MORE,
        hint=hint,
    )


_BEAM_MORE = (
    "follow one case by hand: at each step list every extension of every running "
    "hypothesis with its summed log-probability, keep the beam_width best, and set aside "
    "the ones that end; with an end token, ask which length the chapter divides by, and "
    "when the search may stop"
)
