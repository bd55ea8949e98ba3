"""Attention heads over a prompt of tokens (the paper's eq. 1).

A prompt is a set of tokens ``z_1..z_L`` in ``R^p``. A head has an interaction
matrix ``U`` (p x p) and a value matrix ``V`` (q x p). For a query ``z``::

    softmax head   T(z) = sum_i softmax_i(z_i^T U z) V z_i
    linear head    T(z) = (1/L) sum_i (z_i^T U z) V z_i

There is no ``1/sqrt(p)`` temperature: ``U`` carries the scale. Keys and values
are the prompt tokens themselves, as in the paper.

Every function takes torch tensors and returns tensors of the queries' dtype on
their device. Heads are stacked along a leading axis: ``U`` is ``(H, p, p)``
and ``V`` is ``(H, q, p)``; the output is ``(H, n_queries, q)``.

``exclude`` lets each query ignore one prompt token: the training set is the
prompt, and a training query must not attend to its own copy. It holds, for
each query, the index of the token to leave out, or ``-1``.

The engine lives in private modules, one job each: ``_softmax`` (softmax
heads, their weighted mean, covariance and trace), ``_linear`` (linear heads
and their stacks), ``_heads`` (shape checks, combining heads), ``_kernels``
(the fast average: torch's fused kernel, ``_fused``, or chunked scores, with
the plain formula in ``_reference`` beside them), ``_key_terms`` (this
package's score terms of the token alone), ``_device`` and ``_threads``
(where and on how many threads the estimators compute).
"""

from ._heads import combine_heads
from ._kernels import queries_per_chunk
from ._key_terms import key_bias
from ._linear import linear_attention, stacked_linear_attention, stacked_linear_maps
from ._reference import softmax_average
from ._softmax import (
    METHODS,
    attention_covariance,
    attention_mean,
    attention_trace,
    softmax_attention,
)

__all__ = [
    "METHODS",
    "attention_covariance",
    "attention_mean",
    "attention_trace",
    "combine_heads",
    "key_bias",
    "linear_attention",
    "queries_per_chunk",
    "softmax_attention",
    "softmax_average",
    "stacked_linear_attention",
    "stacked_linear_maps",
]
