"""What the denoisers' training functions need of a model, as one value.

The starts (``_softmax_starts``) and the losses (``_objective``) of every
attention denoiser run the model forward and read a few of its parameters;
they take a :class:`DenoiserModel` rather than the estimator, so that they
are tested with any forward map and cannot reach into fitted state.
"""

from collections.abc import Callable
from typing import NamedTuple


class DenoiserModel(NamedTuple):
    """A denoiser's forward maps and the parameters its starts read.

    ``forward(parameters, queries, prompt, exclude)`` returns the denoised
    queries and ``forward_and_divergence`` also the divergence of the map
    at each query (torch in, torch out); ``parameter_names`` are the trained
    parameters (a start has exactly these), ``scale_power`` the power of
    the data's scale each carries; ``batch_size`` is the training
    minibatch, which also chunks the validation losses. ``key_bias`` and
    ``n_components`` are the softmax denoiser's (``None`` and 0 for the
    others).
    """

    forward: Callable
    forward_and_divergence: Callable
    parameter_names: tuple
    scale_power: dict
    n_heads: int
    residual: bool
    batch_size: int
    key_bias: str | None = None
    n_components: int = 0
