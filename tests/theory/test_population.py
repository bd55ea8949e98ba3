"""Large-prompt limit (Proposition 2.1) and the exact constructions (Section 4 of the paper)."""

import numpy as np
import pytest
import torch
from scipy.special import softmax

from sk_softmix.attention import softmax_attention
from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.theory._mixture import posterior_mean
from sk_softmix.theory.constructions import (
    in_context_construction,
    single_head_construction,
    two_head_construction,
)
from sk_softmix.theory.population import population_softmax_attention


def shared_covariance_identity(queries, means, weights, covariance, U, V):
    """Proposition 2.1 of the paper with a shared covariance: V Gamma U z + V sum_k alpha_k m_k."""
    gate = softmax(np.log(weights) + queries @ U.T @ means.T, axis=1)  # (n, K)
    return (queries @ U.T @ covariance.T + gate @ means) @ V.T


def finite_prompt_head(queries, prompt, U, V):
    """The head on a finite prompt and its Monte Carlo standard error.

    The self-normalised average ``sum_i a_i V z_i`` has, by the delta method,
    variance ``sum_i a_i^2 (V (z_i - mean))^2`` per coordinate.
    """
    finite = softmax_attention(
        torch.tensor(queries), torch.tensor(prompt), torch.tensor(U), torch.tensor(V)
    ).numpy()
    a = softmax(queries @ U.T @ prompt.T, axis=1)  # (n, L)
    centred = (prompt @ V.T)[None, :, :] - finite[:, None, :]  # (n, L, q)
    return finite, np.sqrt(np.einsum("nl,nlq->nq", a**2, centred**2))


def test_population_formula_reduces_to_shared_covariance_form():
    rng = np.random.default_rng(0)
    means = rng.normal(size=(3, 4)) * 2
    weights = np.array([0.2, 0.5, 0.3])
    root = rng.normal(size=(4, 4))
    covariance = root @ root.T / 4
    U, V = rng.normal(size=(4, 4)) / 3, rng.normal(size=(2, 4))
    queries = rng.normal(size=(50, 4)) * 3
    general = population_softmax_attention(
        queries, means, weights, np.stack([covariance] * 3), U, V
    )
    expected = shared_covariance_identity(queries, means, weights, covariance, U, V)
    np.testing.assert_allclose(general, expected, rtol=1e-12, atol=1e-12)


def test_large_prompt_matches_population_within_monte_carlo_error():
    rng = np.random.default_rng(1)
    means = np.array([[2.0, 0.0, 1.0], [-1.0, 2.0, 0.0]])
    weights = np.array([0.4, 0.6])
    covariance = np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
    prompt, _, _ = make_gaussian_mixture(
        60_000,
        means,
        weights,
        covariance=covariance,
        noise_variance=0.0,
        random_state=2,
    )
    U = rng.normal(size=(3, 3)) * 0.3  # "arbitrary small": the gate stays soft
    V = rng.normal(size=(2, 3))
    queries = rng.normal(size=(20, 3)) * 1.5

    finite, standard_error = finite_prompt_head(queries, prompt, U, V)
    limit = shared_covariance_identity(queries, means, weights, covariance, U, V)
    # 40 comparisons: 5 standard errors is a two-sided 6e-7 tail each
    assert np.all(np.abs(finite - limit) < 5 * standard_error)
    # and the error is genuinely small, not hidden by a loose bound
    assert np.max(standard_error) < 0.05 * np.max(np.abs(limit))


def test_large_prompt_matches_population_with_different_component_covariances():
    # Proposition 2.1 in general: the gate carries 1/2 (U z)^T Gamma_k (U z),
    # which a shared covariance cancels; here the two covariances differ by
    # about 1.5 I, so the term moves the gate by about 0.75 |U z|^2
    rng = np.random.default_rng(6)
    means = np.array([[1.5, 0.0, 0.5], [-0.5, 1.0, 0.0]])
    weights = np.array([0.45, 0.55])
    covariances = np.stack(
        [
            np.array([[0.5, 0.1, 0.0], [0.1, 0.4, 0.0], [0.0, 0.0, 0.3]]),
            np.array([[2.0, -0.3, 0.2], [-0.3, 1.8, 0.0], [0.2, 0.0, 1.6]]),
        ]
    )
    # U small enough that every query's weights spread over tens of
    # thousands of tokens (the delta-method error below assumes as much)
    length = 200_000
    component = rng.choice(2, size=length, p=weights)
    roots = np.linalg.cholesky(covariances)
    prompt = means[component] + np.einsum(
        "lij,lj->li", roots[component], rng.normal(size=(length, 3))
    )
    U = rng.normal(size=(3, 3)) * 0.15
    V = rng.normal(size=(2, 3))
    queries = rng.normal(size=(20, 3)) * 1.5

    finite, standard_error = finite_prompt_head(queries, prompt, U, V)
    limit = population_softmax_attention(queries, means, weights, covariances, U, V)
    assert np.all(np.abs(finite - limit) < 5 * standard_error)
    # the quadratic term matters at this precision: dropping it misses by far
    # more than the Monte Carlo error (measured: 29 times the largest), and so
    # does doubling it (30 standard errors)
    transformed = queries @ U.T
    gate = softmax(np.log(weights) + transformed @ means.T, axis=1)
    experts = means[None] + np.einsum("kij,nj->nki", covariances, transformed)
    without_quadratic = np.einsum("nk,nkp->np", gate, experts) @ V.T
    assert np.max(np.abs(without_quadratic - limit)) > 20 * np.max(standard_error)


FIGURE_2_MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])


def bayes(queries, means, weights, gamma2, xi2):
    p = means.shape[1]
    signal = np.stack([gamma2 * np.eye(p)] * len(means))
    return posterior_mean(queries, means, weights, signal + xi2 * np.eye(p), signal)


@pytest.mark.parametrize(
    "means",
    [
        FIGURE_2_MEANS,
        np.array([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0]]),  # complement of span(m1, m2)
        np.array([[2.0, 1.0, -1.0], [-2.0, -1.0, 1.0]]),  # opposite means
    ],
)
# gamma^2 = 0: point masses, where the docstring (Remark 4.2) says it stays exact
@pytest.mark.parametrize("gamma2, xi2", [(1.0, 4.0), (2.0, 0.5), (0.0, 1.0)])
def test_two_heads_equal_bayes_on_the_population(means, gamma2, xi2):
    weights = np.array([0.3, 0.7])  # "any weights"
    p = means.shape[1]
    noisy = np.stack([(gamma2 + xi2) * np.eye(p)] * 2)
    queries = np.random.default_rng(3).normal(size=(200, p)) * 4
    U, V = two_head_construction(means, gamma2, xi2)
    heads = sum(
        population_softmax_attention(queries, means, weights, noisy, U[h], V[h]) for h in range(2)
    )
    np.testing.assert_allclose(heads, bayes(queries, means, weights, gamma2, xi2), atol=1e-12)


@pytest.mark.parametrize(
    "means",
    [
        np.array([[3.0, 0.0], [0.0, 2.0]]),  # unequal norms
        np.array([[3.0, 0.0], [-2.0, 0.0]]),  # opposite directions, unequal norms
        np.array([[2.0], [-1.0]]),  # one feature, unequal norms
    ],
)
def test_two_head_construction_refuses_means_of_unequal_norms(means):
    # the construction is exact only for equal norms: anything else would be
    # a wrong denoiser returned without a word
    with pytest.raises(ValueError, match="equal norms"):
        two_head_construction(means, 1.0, 4.0)


def test_two_head_construction_refuses_equal_means():
    for means in (np.array([[2.0, 1.0], [2.0, 1.0]]), np.array([[2.0], [2.0]])):
        with pytest.raises(ValueError, match="distinct"):
            two_head_construction(means, 1.0, 4.0)


@pytest.mark.parametrize("gamma2, xi2", [(1.0, 4.0), (3.0, 0.5)])
def test_in_context_construction_is_task_independent(gamma2, xi2):
    """Prop 4.4: one residual head and a skip, fixed, are Bayes for every task."""
    rng = np.random.default_rng(4)
    p = 3
    U, V, skip = in_context_construction((gamma2 + xi2) * np.eye(p), xi2)
    for _ in range(5):
        directions = rng.normal(size=(2, p))
        means = 3 * directions / np.linalg.norm(directions, axis=1, keepdims=True)
        weights = rng.dirichlet([1.0, 1.0])
        noisy = np.stack([(gamma2 + xi2) * np.eye(p)] * 2)
        queries = rng.normal(size=(100, p)) * 4
        denoised = queries @ skip.T + population_softmax_attention(
            queries, means, weights, noisy, U, V
        )
        np.testing.assert_allclose(
            denoised, bayes(queries, means, weights, gamma2, xi2), atol=1e-12
        )


@pytest.mark.parametrize("gamma2, xi2, exact", [(2.0, 2.0, True), (1.0, 4.0, False)])
def test_one_head_is_bayes_only_when_signal_and_noise_variances_agree(gamma2, xi2, exact):
    weights = np.array([0.5, 0.5])
    noisy = np.stack([(gamma2 + xi2) * np.eye(2)] * 2)
    queries = np.random.default_rng(5).normal(size=(200, 2)) * 4
    U, V = single_head_construction((gamma2 + xi2) * np.eye(2))
    head = population_softmax_attention(queries, FIGURE_2_MEANS, weights, noisy, U, V)
    error = np.max(np.abs(head - bayes(queries, FIGURE_2_MEANS, weights, gamma2, xi2)))
    assert (error < 1e-12) == exact
