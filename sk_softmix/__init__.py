"""Softmax attention on Gaussian mixtures as scikit-learn estimators.

Estimators
----------
SoftmaxAttentionClassifier
    One softmax head over labelled pairs: LDA when it can, selective when it must.
SoftmaxAttentionDenoiser, LinearAttentionDenoiser
    Attention denoisers whose prompt is the noisy training data.
GaussianMixtureDenoiser, BayesDenoiser
    The plug-in and the exact Bayes baselines.

Modules
-------
attention     the attention engine (softmax and linear heads on tensors)
population    softmax attention on a whole Gaussian mixture (large-prompt limit)
constructions closed-form parameters that equal the Bayes denoiser
lda           the classifier head's effective coordinates and population dynamics
risk          Bayes, best linear and best affine risks
datasets      Gaussian-mixture data generators
dynamics      the iterated denoiser and its clustering transition
study         the comparison study behind ``python -m sk_softmix compare``
"""

from ._bayes_denoiser import BayesDenoiser
from ._classifier import SoftmaxAttentionClassifier
from ._gmm_denoiser import GaussianMixtureDenoiser
from ._linear_denoiser import LinearAttentionDenoiser
from ._softmax_denoiser import SoftmaxAttentionDenoiser

__version__ = "0.1.0.dev0"

__all__ = [
    "BayesDenoiser",
    "GaussianMixtureDenoiser",
    "LinearAttentionDenoiser",
    "SoftmaxAttentionClassifier",
    "SoftmaxAttentionDenoiser",
    "__version__",
]
