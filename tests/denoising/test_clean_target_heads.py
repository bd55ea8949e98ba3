"""Kernel heads over clean targets: the supervised denoiser that selects.

Closed forms: a head's vote is the posterior mean of the empirical prior,
written out in NumPy; on a prior of a few atoms (where that posterior is
the Bayes denoiser as the sample grows) the default comes within a few per
cent of the Bayes risk, far below the best affine map; on Gaussian data,
where the affine map is Bayes, the default keeps it exactly.
"""

import pickle

import numpy as np
import pytest
import torch
from scipy.special import softmax

from sk_softmix import BayesDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.denoising._kernel_head import (
    bandwidth_grid,
    blend_weights,
    kernel_denoiser_parameters,
    target_votes,
)
from sk_softmix.theory.affine_maps import best_affine_map

# three atoms of the plane: the clean points take these values only
ATOMS = np.array([[3.0, 0.0], [0.0, 3.0], [-2.0, -2.0]])
XI2 = 1.0


def _atoms(n, random_state):
    Z, X, _ = make_gaussian_mixture(
        n, ATOMS, covariance=0.0, noise_variance=XI2, random_state=random_state
    )
    return Z, X


def _per_point(denoised, clean):
    return np.mean((denoised - clean) ** 2, axis=1)


def test_vote_is_the_empirical_posterior_mean_with_exclusion():
    rng = np.random.default_rng(0)
    queries, targets = rng.normal(size=(7, 3)), rng.normal(size=(11, 3)) * 2
    exclude = np.array([0, -1, 4, -1, 10, 2, -1])
    bandwidths = np.array([0.5, 1.3])
    votes = target_votes(
        torch.as_tensor(queries), torch.as_tensor(targets), bandwidths, torch.as_tensor(exclude)
    ).numpy()
    for h, vote in zip(bandwidths, votes, strict=True):
        logits = -np.sum((queries[:, None] - targets[None]) ** 2, axis=-1) / (2 * h * h)
        rows = np.flatnonzero(exclude >= 0)
        logits[rows, exclude[rows]] = -np.inf
        np.testing.assert_allclose(vote, softmax(logits, axis=1) @ targets, rtol=1e-10)


def test_fitted_model_is_the_blend_written_out():
    Z, X = _atoms(600, random_state=1)
    denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
    assert denoiser.init_ == "kernel" and denoiser.head_ == "kernel"
    np.testing.assert_array_equal(denoiser.prompt_, X)  # the clean targets are the tokens
    A, c = best_affine_map(Z, X)
    bandwidths = 1 / np.sqrt(denoiser.U_[:, 0, 0])
    weights = denoiser.V_[:, 0, 0]
    queries = np.random.default_rng(2).normal(size=(50, 2)) * 3
    votes = target_votes(torch.as_tensor(queries), torch.as_tensor(X), bandwidths).numpy()
    by_hand = (1 - weights.sum()) * (queries @ A.T + c) + np.tensordot(weights, votes, axes=1)
    np.testing.assert_allclose(denoiser.transform(queries), by_hand, rtol=1e-9, atol=1e-12)
    # the parameters are the engine's key-norm heads
    expected = kernel_denoiser_parameters((A, c), bandwidths, weights)
    for name, value in expected.items():
        np.testing.assert_allclose(getattr(denoiser, f"{name}_"), value, rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_default_reaches_the_bayes_risk_of_a_discrete_prior():
    # with clean values on three atoms, the posterior mean of the empirical
    # prior at h^2 = xi^2 tends to the Bayes denoiser as the prompt grows
    Z, X = _atoms(3000, random_state=3)
    Z_test, X_test = _atoms(4000, random_state=4)
    denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
    errors = _per_point(denoiser.transform(Z_test), X_test)
    oracle = BayesDenoiser(ATOMS, covariance=0.0, noise_variance=XI2).fit(Z)
    bayes = _per_point(oracle.transform(Z_test), X_test)
    A, c = best_affine_map(Z, X)
    affine = _per_point(Z_test @ A.T + c, X_test)
    excess = errors - bayes
    standard_error = excess.std() / np.sqrt(len(excess))
    # measured 1.5% above Bayes; 5% plus three standard errors of the paired
    # difference leaves room for the sample, and the affine map is ~5x Bayes
    assert denoiser.init_ == "kernel"
    assert excess.mean() < 0.05 * bayes.mean() + 3 * standard_error
    assert errors.mean() < 0.5 * affine.mean()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_keeps_the_affine_map_on_gaussian_data(seed):
    # one Gaussian: the affine map is the Bayes denoiser, no vote can beat it
    Z, X, _ = make_gaussian_mixture(
        800, [[1.0, -1.0, 0.5]], covariance=2.0, noise_variance=1.0, random_state=seed
    )
    denoiser = SoftmaxAttentionDenoiser(random_state=seed).fit(Z, X)
    assert denoiser.init_ == "linear"
    A, c = best_affine_map(Z, X)
    queries = Z[:100].astype(np.float32)
    denoised = denoiser.transform(queries)
    assert denoised.dtype == np.float32
    np.testing.assert_allclose(denoised, queries @ A.T + c, rtol=1e-5, atol=1e-5)


def test_kept_heads_only_when_held_out_error_says_so():
    Z, X, _ = make_gaussian_mixture(
        400, [[0.0, 0.0]], covariance=1.0, noise_variance=1.0, random_state=5
    )
    forced = SoftmaxAttentionDenoiser(early_stopping=False, random_state=0).fit(Z, X)
    assert forced.init_ == "kernel"
    untrained = SoftmaxAttentionDenoiser(max_iter=0, random_state=0).fit(Z, X)
    A, c = best_affine_map(Z, X)
    assert untrained.init_ == "linear" and untrained.n_iter_ == 0
    np.testing.assert_allclose(untrained.transform(Z), Z @ A.T + c, rtol=1e-12, atol=1e-12)


def test_sure_of_a_kernel_model_estimates_its_error():
    # the model is a fixed function of the query given the clean prompt, so
    # Stein's estimate on fresh noisy points is unbiased for its error
    Z, X = _atoms(800, random_state=6)
    Z_test, X_test = _atoms(4000, random_state=7)
    denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
    estimate = denoiser.sure(Z_test, noise_variance=XI2)  # the fit estimated it from X - y
    error = _per_point(denoiser.transform(Z_test), X_test)
    difference = estimate - error
    assert abs(difference.mean()) < 3 * difference.std() / np.sqrt(len(difference))


def test_fit_transform_leaves_each_target_out():
    Z, X = _atoms(300, random_state=8)
    denoiser = SoftmaxAttentionDenoiser(random_state=0)
    left_out = denoiser.fit_transform(Z, X)
    seen = denoiser.transform(Z)
    # a query that may attend to its own clean target fits the training set better
    assert np.mean((seen - X) ** 2) < np.mean((left_out - X) ** 2)
    bandwidths = 1 / np.sqrt(denoiser.U_[:, 0, 0])
    weights = denoiser.V_[:, 0, 0]
    A, c = best_affine_map(Z, X)
    votes = target_votes(
        torch.as_tensor(Z), torch.as_tensor(X), bandwidths, torch.arange(len(Z))
    ).numpy()
    by_hand = (1 - weights.sum()) * (Z @ A.T + c) + np.tensordot(weights, votes, axes=1)
    np.testing.assert_allclose(left_out, by_hand, rtol=1e-9, atol=1e-12)


def test_refit_with_bilinear_heads_drops_the_kernel_parameters():
    Z, X = _atoms(200, random_state=9)
    denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
    assert hasattr(denoiser, "W_") and denoiser.head_ == "kernel"
    denoiser.set_params(head="bilinear", max_iter=3).fit(Z, X)
    assert denoiser.head_ == "bilinear" and not hasattr(denoiser, "W_")
    np.testing.assert_array_equal(denoiser.prompt_, Z[denoiser.prompt_indices_])  # noisy tokens
    restored = pickle.loads(pickle.dumps(SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)))
    np.testing.assert_array_equal(
        restored.transform(Z), SoftmaxAttentionDenoiser(random_state=0).fit(Z, X).transform(Z)
    )


def test_combinations_that_do_not_exist_are_clear_errors():
    Z, X = _atoms(100, random_state=10)
    with pytest.raises(ValueError, match="votes the clean targets"):
        SoftmaxAttentionDenoiser(head="kernel", noise_variance=1.0).fit(Z)
    with pytest.raises(ValueError, match="residual=True"):
        SoftmaxAttentionDenoiser(head="kernel", residual=False).fit(Z, X)
    with pytest.raises(ValueError, match="init='bayes'"):
        SoftmaxAttentionDenoiser(head="kernel", init="bayes").fit(Z, X)
    with pytest.raises(ValueError, match="partial_fit"):
        SoftmaxAttentionDenoiser(head="kernel").partial_fit(Z, X)
    fitted = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
    before = fitted.V_.copy()
    with pytest.raises(ValueError, match="partial_fit"):
        fitted.partial_fit(Z, X)
    np.testing.assert_array_equal(fitted.V_, before)  # a failed call changes nothing
    # without clean targets head="auto" trains the paper's heads by SURE
    sure = SoftmaxAttentionDenoiser(noise_variance=1.0, max_iter=3, random_state=0).fit(Z)
    assert sure.head_ == "bilinear"


def test_blend_weights_are_non_negative_least_squares():
    rng = np.random.default_rng(11)
    differences = rng.normal(size=(2, 200, 3))
    residuals = 0.7 * differences[0] - 0.4 * differences[1] + 0.1 * rng.normal(size=(200, 3))
    weights = blend_weights(differences, residuals)
    # the negative weight is clipped, the other refitted alone
    alone = np.sum(differences[0] * residuals) / np.sum(differences[0] ** 2)
    np.testing.assert_allclose(weights, [alone, 0.0], rtol=1e-10)


def test_bandwidth_grid_spans_the_noise_and_the_spacing():
    grid = bandwidth_grid(noise_std=0.1, nearest_distance=0.01)
    np.testing.assert_allclose(grid[[0, -1]], [0.05, 1.6], rtol=1e-12)
    assert np.allclose(grid[1:] / grid[:-1], 2**0.25)
    # negligible noise: the targets' spacing sets the range
    tiny = bandwidth_grid(noise_std=1e-9, nearest_distance=1.0)
    np.testing.assert_allclose(tiny[[0, -1]], [1 / 32, 4.0], rtol=1e-12)
