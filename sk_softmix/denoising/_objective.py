"""The attention denoisers' training losses.

With clean targets the loss is the squared error; without them, Stein's
unbiased risk estimate ``||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)``, whose
expectation is the squared error against the unseen clean points. Both are
per entry (divided by ``p``), like the MSE.
"""

import numpy as np
import torch

from ..attention._device import as_tensor
from ..training._validation import prompt_positions


def training_objective(model, X, y, noise_variance, prompt_indices, validation_rows, scale, device):
    """``objective(parameters) -> (loss_on, validation_losses)`` in training units.

    The loss is the squared error against ``y`` when given, otherwise
    Stein's unbiased risk estimate ``||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)``,
    whose expectation is the squared error against the unseen clean
    points; both per entry (divided by ``p``), like the MSE. Training
    queries are the rows outside ``validation_rows``, each left out of
    its own prompt; validation rows are not in the prompt. ``model`` is a
    ``_model.DenoiserModel``.
    """
    validation = np.zeros(X.shape[0], dtype=bool)
    held_out = np.empty(0, dtype=np.int64) if validation_rows is None else validation_rows
    validation[held_out] = True
    queries = as_tensor(X / scale, device, torch.float32)
    targets = None if y is None else as_tensor(y / scale, device, torch.float32)
    xi2 = noise_variance / scale**2
    prompt = queries[as_tensor(prompt_indices, device)]
    exclude = as_tensor(prompt_positions(prompt_indices, X.shape[0]), device)
    train_rows = as_tensor(np.flatnonzero(~validation), device)
    held_out = as_tensor(held_out, device)  # in random order: a prefix is a sample

    def per_query_losses(parameters, rows, query_exclude):
        chunk_queries = queries[rows]
        if targets is not None:
            denoised = model.forward(parameters, chunk_queries, prompt, query_exclude)
            return torch.mean((denoised - targets[rows]) ** 2, dim=-1)
        denoised, divergence = model.forward_and_divergence(
            parameters, chunk_queries, prompt, query_exclude
        )
        return stein_risk(denoised, chunk_queries, divergence, xi2)

    def objective(parameters):
        def loss_on(batch):
            rows = train_rows[batch]
            return per_query_losses(parameters, rows, exclude[rows]).mean()

        def validation_losses(limit=None):
            rows = held_out[:limit]
            return in_chunks(
                0,
                len(rows),
                model.batch_size,
                lambda chunk: per_query_losses(parameters, rows[chunk], None),
            )

        return loss_on, validation_losses if validation.any() else None

    return objective


def stein_risk(denoised, queries, divergence, noise_variance):
    """Per-query SURE divided by ``p``: ``(||f - z||^2 - p xi^2 + 2 xi^2 div) / p``."""
    p = queries.shape[-1]
    residual = ((denoised - queries) ** 2).sum(dim=-1)
    return (residual - p * noise_variance + 2 * noise_variance * divergence) / p


def in_chunks(start: int, stop: int, size: int, evaluate) -> torch.Tensor:
    """``evaluate(rows)`` on consecutive slices of at most ``size`` rows of
    ``start:stop``, concatenated: the one place queries are chunked."""
    size = max(int(size), 1)
    parts = [evaluate(slice(first, min(first + size, stop))) for first in range(start, stop, size)]
    if len(parts) == 1:  # the usual transform: no copy of the whole result
        return parts[0]
    return torch.cat(parts) if parts else evaluate(slice(start, stop))
