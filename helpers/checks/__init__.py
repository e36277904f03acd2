"""Self-checks for the exercises: run on the reader's own function, report in words.

Introduced in chapter 1. Each chapter's checks live in a module of this package named
by topic (``helpers.checks.softmax`` for chapter 1), built on the shared core in
``helpers.checks.core``; every ``check_*`` function is re-exported here, so readers call
``helpers.checks.check_softmax(my_softmax)``.

Every ``check_*`` function calls the reader's function on a handful of chosen
inputs (ordinary ones, then the ones that break a naive formula), compares with
the expected answers and returns a :class:`CheckReport`. The report is truthy iff
every case passed, and its ``repr`` says, for each failing case, smallest input
first, what went in, what was expected, what came back (or what was raised), the
slip when it is recognised, and what that case expects (a property or a value); then
the section of the book that decides it, and how to ask for a fuller hint,
``check_x(fn, hint=True)``. No report, hint or docstring shows the answer's code or
formula. A check never raises because the reader's function did.

The book's own implementations are not answers: :data:`IMPLEMENTATIONS` declares, for
every check, the functions of ``helpers`` that compute what it grades, and a function
that calls one of them (by any route: an alias, ``getattr``, a wrapper,
``functools.partial``) is reported as not attempted, naming the call
(:mod:`helpers.checks.shortcuts` watches for it). Other helpers stay allowed.

The core, for writing new checks
--------------------------------
A check is a list of :class:`Case` objects plus, optionally, a ``diagnose``
function that recognises typical wrong answers; :func:`run_checks` does the rest::

    def check_double(fn, *, hint=False):
        cases = [
            Case(
                "a negative entry",
                {"z": np.array([1.0, -2.0])},
                np.array([2.0, -4.0]),
                hint="the sign of every entry is kept",  # a property, not the formula
            )
        ]
        return run_checks(
            fn,
            cases,
            check_name="check_double",  # add its entry to IMPLEMENTATIONS
            see=section(1, "Definition"),  # where the book decides it, by its title
            more="a fuller hint, shown with hint=True; it stops short of the answer",
            hint=hint,
        )

Every report also has a ``status`` ("passed", "failed", or "not attempted" when the
function still raises ``NotImplementedError``, as the student edition's starting cells
do, or calls the book's own implementation: ``book_calls`` says which), a one-line
``message`` and ``to_dict()``; :func:`run_self_check` runs a check on a function looked
up by name in a namespace and never raises (for graders).

The report's text is deterministic (no addresses, timings or numpy print options
leak in), so notebooks that show it pass strict output comparison.
"""

from helpers.checks.attention import (
    check_attention,
    check_attention_grad,
    check_causal_mask,
    check_kernel_attention,
    check_left_padded_attention,
    check_masked_attention,
    check_self_attention_grad,
)
from helpers.checks.circuits import (
    check_k_composition_score,
    check_prefix_matching_score,
    check_previous_token_score,
)
from helpers.checks.core import (
    ATOL_FLOAT32,
    ATOL_FLOAT64,
    ERROR,
    FAILED,
    IMPLEMENTATIONS,
    NOT_ATTEMPTED,
    PASSED,
    RTOL_FLOAT32,
    RTOL_FLOAT64,
    Case,
    CaseResult,
    CheckReport,
    Finding,
    SelfCheckResult,
    run_checks,
    run_self_check,
    section,
)
from helpers.checks.cost import (
    check_causal_linear_attention,
    check_chunked_linear_attention,
    check_flash1_update,
    check_kv_cache_bytes,
    check_online_softmax_merge,
    check_tiled_attention,
)
from helpers.checks.models import (
    check_beam_search,
    check_load_balancing_loss,
    check_mlm_corruption,
    check_next_token_distribution,
    check_top_k_gating,
)
from helpers.checks.multihead import (
    check_mha_backward,
    check_mha_parameter_count,
    check_multi_head_attention,
)
from helpers.checks.notebook import install as _install_notebook_handler
from helpers.checks.notebook import shown_where_called as _shown_where_called
from helpers.checks.positional import (
    check_alibi_slopes,
    check_concatenated_shift,
    check_position_from_encoding,
    check_rope,
    check_rope_half,
    check_rope_layout_conversion,
    check_rope_layout_inverse,
    check_sinusoidal_encoding,
    check_sinusoidal_shift,
)
from helpers.checks.softmax import (
    check_entropy,
    check_log_softmax,
    check_log_softmax_backward,
    check_logsumexp,
    check_softmax,
    check_softmax_jacobian,
    check_softmax_temperature,
)
from helpers.checks.theory import (
    check_min_head_width,
    check_self_attention_jacobian,
    check_truncated_attention,
)
from helpers.checks.transformer import (
    check_block_parameter_count,
    check_encoder_block,
    check_fold_layer_norm,
    check_layer_norm,
    check_layer_norm_backward,
    check_llama_block_parameter_count,
    check_rms_norm_backward,
)

_install_notebook_handler()  # in IPython: a check on an undefined name reports in one line

__all__ = [
    "ATOL_FLOAT32",
    "ATOL_FLOAT64",
    "ERROR",
    "FAILED",
    "IMPLEMENTATIONS",
    "NOT_ATTEMPTED",
    "PASSED",
    "RTOL_FLOAT32",
    "RTOL_FLOAT64",
    "Case",
    "CaseResult",
    "CheckReport",
    "Finding",
    "SelfCheckResult",
    "check_alibi_slopes",
    "check_attention",
    "check_attention_grad",
    "check_beam_search",
    "check_block_parameter_count",
    "check_causal_linear_attention",
    "check_causal_mask",
    "check_chunked_linear_attention",
    "check_concatenated_shift",
    "check_encoder_block",
    "check_entropy",
    "check_flash1_update",
    "check_fold_layer_norm",
    "check_k_composition_score",
    "check_kernel_attention",
    "check_kv_cache_bytes",
    "check_layer_norm",
    "check_layer_norm_backward",
    "check_left_padded_attention",
    "check_llama_block_parameter_count",
    "check_load_balancing_loss",
    "check_log_softmax",
    "check_log_softmax_backward",
    "check_logsumexp",
    "check_masked_attention",
    "check_mha_backward",
    "check_mha_parameter_count",
    "check_min_head_width",
    "check_mlm_corruption",
    "check_multi_head_attention",
    "check_next_token_distribution",
    "check_online_softmax_merge",
    "check_position_from_encoding",
    "check_prefix_matching_score",
    "check_previous_token_score",
    "check_rms_norm_backward",
    "check_rope",
    "check_rope_half",
    "check_rope_layout_conversion",
    "check_rope_layout_inverse",
    "check_self_attention_grad",
    "check_self_attention_jacobian",
    "check_sinusoidal_encoding",
    "check_sinusoidal_shift",
    "check_softmax",
    "check_softmax_jacobian",
    "check_softmax_temperature",
    "check_tiled_attention",
    "check_top_k_gating",
    "check_truncated_attention",
    "run_checks",
    "run_self_check",
    "section",
]

# In a notebook, every check's report shows where the check runs (in a loop too).
for _name in [n for n in __all__ if n.startswith("check_")]:
    globals()[_name] = _shown_where_called(globals()[_name])
del _name
