"""The shared code of *Mathematics of Attention and Transformers*.

Every chapter imports this package. The public API is re-exported here; each
module's docstring says which chapter introduces it.
"""

from helpers import checks
from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.cost import AttentionCost, attention_cost, kv_cache_bytes
from helpers.flash import flash_attention, flash_attention_backward, online_softmax_merge
from helpers.glue import glue
from helpers.kv_cache import KVCache, attention_decoder, init_attention_decoder
from helpers.linear_attention import (
    favor_features,
    linear_attention,
    performer_attention,
    random_features,
)
from helpers.masks import causal_mask, padding_mask
from helpers.models import (
    bert_forward,
    bert_params_from_hf,
    decoder_layer,
    gpt2_forward,
    gpt2_generate,
    gpt2_params_from_hf,
    init_decoder_layer_params,
    mlm_corrupt,
    next_token_distribution,
    sample_next_token,
)
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
from helpers.positional import (
    alibi_bias,
    alibi_slopes,
    rope,
    rope_frequencies,
    rotate_pairs,
    sinusoidal_encoding,
    sinusoidal_shift,
)
from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian
from helpers.theory import (
    l2_lipschitz_bound,
    l2_self_attention,
    l2_self_attention_jacobian,
    min_head_width,
    rank_collapse_residual,
    self_attention_jacobian,
    truncated_attention,
)
from helpers.transformer import (
    Adam,
    block_parameter_count,
    cross_entropy,
    encoder_block,
    encoder_block_backward,
    feed_forward,
    feed_forward_backward,
    gelu,
    gelu_tanh,
    init_block_params,
    layer_norm,
    layer_norm_backward,
    layer_norm_jacobian,
    relu,
    rms_norm,
)
from helpers.widgets import Explorer, Param, log_values

__all__ = [
    "Adam",
    "AttentionCost",
    "Explorer",
    "KVCache",
    "Param",
    "alibi_bias",
    "alibi_slopes",
    "attention_backward",
    "attention_cost",
    "attention_decoder",
    "bert_forward",
    "bert_params_from_hf",
    "block_parameter_count",
    "causal_mask",
    "checks",
    "cross_entropy",
    "decoder_layer",
    "encoder_block",
    "encoder_block_backward",
    "entropy",
    "expert_capacity",
    "favor_features",
    "feed_forward",
    "feed_forward_backward",
    "flash_attention",
    "flash_attention_backward",
    "gelu",
    "gelu_tanh",
    "glue",
    "gpt2_forward",
    "gpt2_generate",
    "gpt2_params_from_hf",
    "grouped_query_attention",
    "init_attention_decoder",
    "init_block_params",
    "init_decoder_layer_params",
    "init_mha_params",
    "kv_cache_bytes",
    "kv_cache_elements",
    "l2_lipschitz_bound",
    "l2_self_attention",
    "l2_self_attention_jacobian",
    "layer_norm",
    "layer_norm_backward",
    "layer_norm_jacobian",
    "linear_attention",
    "load_balancing_loss",
    "log_softmax",
    "log_values",
    "logsumexp",
    "merge_heads",
    "mha_parameter_count",
    "min_head_width",
    "mlm_corrupt",
    "moe_layer",
    "moe_parameter_count",
    "multi_head_attention",
    "multi_head_attention_backward",
    "next_token_distribution",
    "online_softmax_merge",
    "padding_mask",
    "performer_attention",
    "random_features",
    "rank_collapse_residual",
    "relu",
    "rms_norm",
    "rope",
    "rope_frequencies",
    "rotate_pairs",
    "router_z_loss",
    "sample_next_token",
    "scaled_dot_product_attention",
    "self_attention_jacobian",
    "sinusoidal_encoding",
    "sinusoidal_shift",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "top_k_gating",
    "truncated_attention",
]

__version__ = "0.1.0"
