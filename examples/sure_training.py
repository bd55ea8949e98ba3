"""
Training a denoiser on noisy data alone
=======================================

With the noise variance known, Stein's unbiased risk estimate
``||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)`` has the expectation of the
squared error against the unseen clean points, so the softmax-attention
denoiser trains without a single clean example (the divergence of a head is
``tr(V Cov_a U)`` in closed form).
"""

import numpy as np

from sk_softmix import BayesDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture

means = np.array([[3.0, 0.0], [0.0, 3.0]])  # the paper's Figure 2 task
Z, _, _ = make_gaussian_mixture(5_000, means, covariance=1.0, noise_variance=4.0, random_state=0)
Z_test, X_test, _ = make_gaussian_mixture(
    5_000, means, covariance=1.0, noise_variance=4.0, random_state=1
)

denoiser = SoftmaxAttentionDenoiser(noise_variance=4.0, random_state=0).fit(Z)  # no clean y
oracle = BayesDenoiser(means, covariance=1.0, noise_variance=4.0).fit(Z)

mse = np.mean((denoiser.transform(Z_test) - X_test) ** 2)
bayes = np.mean((oracle.transform(Z_test) - X_test) ** 2)
print(f"trained on noisy points only: MSE {mse:.4f}, Bayes {bayes:.4f}, ratio {mse / bayes:.3f}")
print(
    f"its own estimate of that MSE (mean SURE on fresh points): {denoiser.sure(Z_test).mean():.4f}"
)
