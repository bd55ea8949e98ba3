"""
Denoising a new task in context
===============================

One set of attention weights, meta-trained with ``partial_fit`` over many
tasks that share their variances but not their means or weights, denoises a
task it has never seen: its noisy points are the prompt (Proposition 4.4). A
Gaussian mixture refitted on that task is the reference.
"""

import numpy as np

from sk_softmix import BayesDenoiser, GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_denoising_tasks

# partial_fit decays its step over the calls by itself (learning_rate / (1 + t/300)^2
# over its Adam steps t), so the plain loop is all it takes
denoiser = SoftmaxAttentionDenoiser(random_state=0)
for Z, X, _, _ in make_denoising_tasks(100, 2_000, 2, random_state=0):
    denoiser.partial_fit(Z, X)

Z, X, means, weights = next(make_denoising_tasks(1, 4_000, 2, random_state=99))
prompt, queries, clean = Z[:2_000], Z[2_000:], X[2_000:]
in_context = denoiser.transform(queries, prompt=prompt)  # no retraining
refit = GaussianMixtureDenoiser(noise_variance=4.0, random_state=0).fit(prompt).transform(queries)
bayes = BayesDenoiser(means, weights, covariance=1.0, noise_variance=4.0).fit(queries)
risk = np.mean((bayes.transform(queries) - clean) ** 2)
for name, denoised in [("attention, in context", in_context), ("mixture refit", refit)]:
    print(f"{name:>22}: MSE / Bayes = {np.mean((denoised - clean) ** 2) / risk:.3f}")
