"""The shared code of *Mathematics of Attention and Transformers*.

Every chapter imports this package. The public API is re-exported here; each
module's docstring says which chapter introduces it.
"""

from helpers import checks
from helpers.glue import glue
from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian
from helpers.widgets import Explorer, Param, log_values

__all__ = [
    "Explorer",
    "Param",
    "checks",
    "entropy",
    "glue",
    "log_softmax",
    "log_values",
    "logsumexp",
    "softmax",
    "softmax_jacobian",
]

__version__ = "0.1.0"
