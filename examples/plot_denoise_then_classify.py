"""
A denoiser in front of a classifier, tuned without clean data
=============================================================

Two things a denoiser needs in a real pipeline, shown on noisy data alone:

- **In front of a classifier.** In ``make_pipeline(denoiser, LDA())`` the
  pipeline's ``y`` are class labels, not clean points. A denoiser's clean
  targets have the shape of ``X``; any other ``y`` belongs to a later step,
  so the denoiser ignores it and trains by Stein's unbiased risk estimate
  (SURE) from ``noise_variance``. The pipeline calls ``fit_transform`` on
  the training points, which leaves each point out of its own prompt, so the
  classifier learns on points denoised exactly as test points will be.
- **Model selection without clean data.** ``score(X)`` with no ``y`` is
  minus SURE per entry, an unbiased estimate of minus the mean squared
  error, so ``GridSearchCV(denoiser, grid).fit(Z)`` tunes from noisy points.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_validate
from sklearn.pipeline import make_pipeline

from sk_softmix import (
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_gaussian_mixture

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

# %%
# Noisy digits, classified with and without a denoiser
# -----------------------------------------------------
# Pixels in [0, 1] plus Gaussian noise of standard deviation 0.5: LDA on the
# noisy pixels against LDA behind each denoiser, in the same folds. No clean
# image is used anywhere.
X, labels = load_digits(return_X_y=True)
rng = np.random.default_rng(0)
Z = X / 16 + 0.5 * rng.normal(size=X.shape)
folds = StratifiedKFold(3, shuffle=True, random_state=0)

models = {
    "LDA on the noisy pixels": LinearDiscriminantAnalysis(),
    "LinearAttentionDenoiser -> LDA": make_pipeline(
        LinearAttentionDenoiser(noise_variance=0.25), LinearDiscriminantAnalysis()
    ),
    "SoftmaxAttentionDenoiser -> LDA": make_pipeline(
        SoftmaxAttentionDenoiser(noise_variance=0.25, max_iter=20, random_state=0),
        LinearDiscriminantAnalysis(),
    ),
}
accuracy = {}
for name, model in models.items():
    scores = cross_validate(model, Z, labels, cv=folds)["test_score"]
    accuracy[name] = scores
    print(f"{name:34s} accuracy {scores.mean():.3f} +- {scores.std():.3f}")

# %%
# Which start did the softmax denoiser keep, trained by SURE on all images?
softmax = models["SoftmaxAttentionDenoiser -> LDA"].fit(Z, labels)[0]
print("softmax denoiser kept its", repr(softmax.init_), "start")

# %%
# On 64 pixels with 1,797 images the held-out SURE finds nothing selective
# worth keeping, so the softmax denoiser keeps its linear start, the Wiener
# map; both denoisers still help LDA a little, by shrinking the directions
# that hold only noise.

# %%
# Choosing a model from noisy data alone
# --------------------------------------
# The paper's two-cluster task with unit noise. ``GridSearchCV`` scores each
# candidate by ``score(Z_held_out)``, minus SURE; a second search scores with
# the clean points, which a user would not have. Both pick the same model.
means = np.array([[3.0, 0.0], [0.0, 3.0]])
Z, X_clean, _ = make_gaussian_mixture(3000, means, noise_variance=1.0, random_state=0)
grid = {"n_components": [1, 2, 3], "covariance_type": ["spherical", "full"]}
search_folds = KFold(3, shuffle=True, random_state=0)
denoiser = GaussianMixtureDenoiser(noise_variance=1.0, random_state=0)
by_sure = GridSearchCV(denoiser, grid, cv=search_folds).fit(Z)
by_clean = GridSearchCV(denoiser, grid, cv=search_folds).fit(Z, X_clean)
print("chosen by SURE:        ", by_sure.best_params_)
print("chosen by clean points:", by_clean.best_params_)

fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
names = list(accuracy)
axes[0].barh(
    names, [accuracy[name].mean() for name in names], xerr=[accuracy[n].std() for n in names]
)
axes[0].set_xlim(0.5, 0.75)
axes[0].set_xlabel("cross-validated accuracy")
axes[0].set_title("noisy digits")
labels_grid = [
    f"{p['covariance_type']}, K={p['n_components']}" for p in by_sure.cv_results_["params"]
]
axes[1].plot(labels_grid, -by_sure.cv_results_["mean_test_score"], "o-", label="SURE (noisy only)")
axes[1].plot(labels_grid, -by_clean.cv_results_["mean_test_score"], "s--", label="MSE (clean)")
axes[1].set_ylabel("held-out error per entry")
axes[1].tick_params(axis="x", rotation=45)
axes[1].legend()
axes[1].set_title("model selection")
fig.tight_layout()
