"""Softmax attention on Gaussian mixtures as scikit-learn estimators.

Estimators
----------
SoftmaxAttentionClassifier
    Kernel heads over the labelled pairs on the best linear (or quadratic)
    start, kept where they beat it out of fold: linear when it can,
    selective when it must.
SoftmaxAttentionDenoiser
    Kernel heads over clean targets blended with the best affine map, or the
    paper's heads over noisy observations, trained by SURE without them.
LinearAttentionDenoiser
    Stacked linear attention, never better than the best affine map.
GaussianMixtureDenoiser, BayesDenoiser
    The plug-in and the exact Bayes baselines.

Subpackages
-----------
attention       the engine: softmax and linear heads on torch tensors, CPU or CUDA
classification  SoftmaxAttentionClassifier
denoising       the attention denoisers and the Bayes baselines
training        what the estimators share to fit: input checks, solvers, start selection
theory          the paper's statements as NumPy functions: LDA coordinates,
                constructions, the large-prompt limit, risks, dynamics
image           image denoising: any denoiser on patches, trainable non-local
                means, gated affine experts over similar patches
                (``denoise_image_wiener``)
study           the comparison study behind ``python -m sk_softmix compare``
datasets        Gaussian-mixture data generators

Dependencies point one way: ``theory`` and ``attention`` import no other part
of the package; ``training`` builds on ``attention``; the estimators on all
three; ``image`` on the estimators; ``study`` on everything, and nothing
imports it (the user guide's "Architecture" page draws the map).
"""

from . import _moved
from ._version import __version__
from .classification import SoftmaxAttentionClassifier
from .denoising import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionDenoiser,
)

# old module paths (sk_softmix.lda, the modules saved models name) keep importing
_moved.install()

__all__ = [
    "BayesDenoiser",
    "GaussianMixtureDenoiser",
    "LinearAttentionDenoiser",
    "SoftmaxAttentionClassifier",
    "SoftmaxAttentionDenoiser",
    "__version__",
]
