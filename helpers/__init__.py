"""The shared code of *Mathematics of Attention and Transformers*.

Every chapter imports this package. The public API is re-exported here; each
module's docstring says which chapter introduces it.
"""

from helpers import checks
from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.glue import glue
from helpers.kv_cache import KVCache, attention_decoder, init_attention_decoder
from helpers.masks import causal_mask, padding_mask
from helpers.moe import (
    expert_capacity,
    load_balancing_loss,
    moe_layer,
    moe_parameter_count,
    router_z_loss,
    top_k_gating,
)
from helpers.multihead import (
    grouped_query_attention,
    init_mha_params,
    kv_cache_elements,
    merge_heads,
    mha_parameter_count,
    multi_head_attention,
    multi_head_attention_backward,
    split_heads,
)
from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian
from helpers.widgets import Explorer, Param, log_values

__all__ = [
    "Explorer",
    "KVCache",
    "Param",
    "attention_backward",
    "attention_decoder",
    "causal_mask",
    "checks",
    "entropy",
    "expert_capacity",
    "glue",
    "grouped_query_attention",
    "init_attention_decoder",
    "init_mha_params",
    "kv_cache_elements",
    "load_balancing_loss",
    "log_softmax",
    "log_values",
    "logsumexp",
    "merge_heads",
    "mha_parameter_count",
    "moe_layer",
    "moe_parameter_count",
    "multi_head_attention",
    "multi_head_attention_backward",
    "padding_mask",
    "router_z_loss",
    "scaled_dot_product_attention",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "top_k_gating",
]

__version__ = "0.1.0"
