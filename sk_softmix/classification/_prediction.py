"""The classifier's scores at prediction, from its fitted arrays.

Two paths: the engine's attention over the whole prompt (torch, CPU or
CUDA, the fused kernel where it is exact), and the kernel heads' vote over
each query's nearest tokens (``_neighbours``) for models fitted with
``n_neighbors``. Both return the start's linear score plus the heads'; the
quadratic start's term is added by the estimator.
"""

import numpy as np
import torch

from ..attention._device import as_tensor
from ..attention._fused import fused_kernel_available
from ..attention._kernels import queries_per_chunk
from ..attention._threads import one_cpu_thread, predict_on_threads
from ._heads import classifier_scores, classifier_tokens, from_fitted_shapes, label_blocks
from ._neighbours import neighbour_head_votes, token_index
from ._tokens import equal_weights


def attention_scores(
    features, fitted, prompt_X, prompt_y, prompt_weights, n_classes, device, dtype, batch_size
):
    """Scores (n, 1 or n_classes) of the queries ``features`` (the model's
    coordinates) by attention over the prompt, computed in the torch
    ``dtype``; ``fitted`` maps a parameter's name to its fitted array
    (``U11``, ..., ``skip``, ``intercept``), ``batch_size`` is
    ``transform_batch_size``."""
    n_heads = len(fitted["U11"])
    # the tensor set-up on one thread too: a kernel on torch's pool would
    # leave its threads spinning through the prediction
    with torch.no_grad(), one_cpu_thread(device):
        parameters = from_fitted_shapes(
            {name: as_tensor(value, device, dtype) for name, value in fitted.items()}, n_classes
        )
        prompt = classifier_tokens(
            as_tensor(prompt_X, device, dtype), as_tensor(prompt_y, device), n_classes
        )
        token_bias = None
        if not equal_weights(prompt_weights):
            token_bias = as_tensor(np.log(prompt_weights), device, dtype)
        queries = as_tensor(features, device, dtype)  # see ``standardize``
    chunk = queries_per_chunk(batch_size, n_heads, len(prompt))

    def chunk_scores(start, stop):
        # the engine chunks the queries, reusing one scores buffer
        return classifier_scores(parameters, queries[start:stop], prompt, None, chunk, token_bias)

    fused_scores = len(features) * len(prompt) * n_heads
    if not fused_kernel_available(device, leave_one_out=False):
        fused_scores = None
    with torch.no_grad():
        scores = predict_on_threads(device, len(features), chunk, chunk_scores, fused_scores)
    return scores.cpu().numpy()


def neighbour_scores(
    features, fitted, metric, prompt_X, prompt_y, prompt_weights, n_neighbors, n_classes
):
    """The linear start's score plus the kernel heads' votes over each query's
    ``n_neighbors`` nearest tokens in the metric ``A`` (``U11 = A^T A /
    h^2``), in float64; ``fitted`` holds ``U11``, ``v22``, ``skip`` and
    ``intercept``.

    The neighbour index is built here, from the prompt, so that the fitted
    state stays NumPy (a tree over 240,000 tokens in 8 features builds in
    about 0.6 s, a hundredth of searching it for 60,000 queries).
    """
    gram = np.trace(metric.T @ metric)
    bandwidths = np.sqrt(gram / np.trace(fitted["U11"], axis1=1, axis2=2))
    readouts = fitted["v22"] if n_classes == 2 else fitted["v22"][:, 0, 0]
    blocks = np.asarray(label_blocks(prompt_y, n_classes), dtype=np.float64)
    features = np.asarray(features, dtype=np.float64)
    votes = neighbour_head_votes(
        token_index(prompt_X.astype(np.float64) @ metric.T),
        features @ metric.T,
        blocks,
        prompt_weights,
        bandwidths,
        readouts,
        n_neighbors,
    )
    return features @ fitted["skip"].T + fitted["intercept"] + votes
