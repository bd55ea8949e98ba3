"""Denoisers: attention over a prompt of noisy points, and the Bayes baselines.

_softmax           SoftmaxAttentionDenoiser (its starts in _softmax_starts,
                   its kernel heads over clean targets in _kernel_head)
_linear            LinearAttentionDenoiser
_gaussian_mixture  GaussianMixtureDenoiser, the plug-in Bayes denoiser
_bayes             BayesDenoiser, the exact posterior mean of a known mixture
_base              what the attention denoisers share: fit, transform, SURE
_meta_training     partial_fit: training over many tasks, for use in context
_objective         the training losses: squared error, or Stein's unbiased
                   risk estimate
_mixin             transform, predict and score of every denoiser
"""

from ._bayes import BayesDenoiser
from ._gaussian_mixture import GaussianMixtureDenoiser
from ._linear import LinearAttentionDenoiser
from ._softmax import SoftmaxAttentionDenoiser

__all__ = [
    "BayesDenoiser",
    "GaussianMixtureDenoiser",
    "LinearAttentionDenoiser",
    "SoftmaxAttentionDenoiser",
]
