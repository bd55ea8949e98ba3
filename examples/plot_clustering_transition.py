"""
The clustering transition of the iterated denoiser
==================================================

Iterating the Bayes denoiser of two equal-weight point masses sends every
start to the midpoint when the separation ``lambda`` is at most 1, and each
side of the separating line to its own attractor ``c +- u* h`` when it is
larger (Proposition 4.3, the paper's Figure 3). A trained softmax-attention
denoiser shows the same transition.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sk_softmix import BayesDenoiser, SoftmaxAttentionDenoiser  # noqa: E402
from sk_softmix.datasets import make_gaussian_mixture  # noqa: E402
from sk_softmix.dynamics import plot_trajectories, separation  # noqa: E402

starts = np.random.default_rng(0).normal(size=(40, 2)) * 2
figure, axes = plt.subplots(2, 2, figsize=(9, 9))
for column, lam in enumerate((0.8, 1.5)):
    means = np.array([[lam * 0.6, lam * 0.8], [-lam * 0.6, -lam * 0.8]])
    Z, X, _ = make_gaussian_mixture(
        3_000, means, covariance=0.0, noise_variance=1.0, random_state=0
    )
    denoisers = {
        "Bayes denoiser": BayesDenoiser(means, covariance=0.0, noise_variance=1.0).fit(Z),
        "softmax attention": SoftmaxAttentionDenoiser(random_state=0).fit(Z, X),
    }
    for row, (name, denoiser) in enumerate(denoisers.items()):
        ax = plot_trajectories(
            denoiser,
            starts,
            30,
            means=means,
            covariance=0.0,
            noise_variance=1.0,
            ax=axes[row, column],
        )
        ax.set_title(f"{name}, lambda = {separation(means, 0.0, 1.0):.1f}")
figure.tight_layout()
figure.savefig("clustering_transition.png", dpi=80)
print("wrote clustering_transition.png")
