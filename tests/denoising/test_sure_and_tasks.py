"""Training from noisy data alone (SURE) and denoising new tasks in context."""

import numpy as np
import pytest
import torch

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_denoising_tasks, make_gaussian_mixture

MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])
TASK = {"covariance": 1.0, "noise_variance": 4.0}


def divergence_by_autograd(denoiser, queries, prompt, exclude):
    """Trace of the Jacobian of the forward pass, one query at a time."""
    parameters = {
        name: torch.tensor(getattr(denoiser, f"{name}_")) for name in denoiser._parameter_names()
    }
    traces = []
    for k in range(len(queries)):
        chunk_exclude = None if exclude is None else exclude[k : k + 1]

        def forward(z, chunk_exclude=chunk_exclude):
            return denoiser._forward(parameters, z, prompt, chunk_exclude)[0]

        jacobian = torch.autograd.functional.jacobian(forward, queries[k : k + 1])
        traces.append(torch.trace(jacobian.reshape(queries.shape[1], queries.shape[1])))
    return torch.stack(traces), parameters


@pytest.mark.parametrize(
    "denoiser",
    [
        SoftmaxAttentionDenoiser(n_heads=3, init="random", max_iter=3, random_state=0),
        SoftmaxAttentionDenoiser(residual=False, init="random", max_iter=3, random_state=0),
        LinearAttentionDenoiser(n_layers=3, init="random", max_iter=3, random_state=0),
        LinearAttentionDenoiser(
            n_layers=2, residual=False, init="random", max_iter=3, random_state=0
        ),
    ],
    ids=["softmax-residual", "softmax-plain", "linear-residual", "linear-plain"],
)
@pytest.mark.parametrize("leave_out", [False, True])
def test_closed_form_divergence_is_the_jacobian_trace(denoiser, leave_out):
    rng = np.random.default_rng(0)
    Z, X = rng.normal(size=(50, 3)) * 2, rng.normal(size=(50, 3))
    denoiser.fit(Z, X)
    prompt, queries = torch.tensor(Z), torch.tensor(Z[:7] + 0.1)
    exclude = torch.arange(7) if leave_out else None
    expected, parameters = divergence_by_autograd(denoiser, queries, prompt, exclude)
    denoised, divergence = denoiser._forward_and_divergence(parameters, queries, prompt, exclude)
    torch.testing.assert_close(divergence, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(denoised, denoiser._forward(parameters, queries, prompt, exclude))


def test_sure_is_unbiased_for_the_squared_error():
    Z, _, _ = make_gaussian_mixture(5_000, MEANS, **TASK, random_state=0)
    Z_test, X_test, _ = make_gaussian_mixture(20_000, MEANS, **TASK, random_state=1)
    denoiser = SoftmaxAttentionDenoiser(noise_variance=4.0, max_iter=0, random_state=0).fit(Z)
    errors = np.mean((denoiser.transform(Z_test) - X_test) ** 2, axis=1)
    estimates = denoiser.sure(Z_test)
    difference = estimates - errors
    # E[SURE] = E[error]: the paired mean difference is within 4 standard errors
    assert abs(difference.mean()) < 4 * difference.std() / np.sqrt(len(difference))


@pytest.mark.slow
def test_sure_training_on_noisy_points_only_reaches_bayes():
    Z, _, _ = make_gaussian_mixture(20_000, MEANS, **TASK, random_state=0)
    Z_test, X_test, _ = make_gaussian_mixture(20_000, MEANS, **TASK, random_state=1)
    denoiser = SoftmaxAttentionDenoiser(noise_variance=4.0, random_state=0).fit(Z)  # no y
    # a trained start chosen by SURE on held-out noisy points over the best
    # affine map (two starts trained: the linear one and the construction)
    assert 0 < len(denoiser.history_) <= denoiser.max_iter
    assert len(denoiser.history_) <= denoiser.n_iter_ <= 2 * denoiser.max_iter
    bayes = BayesDenoiser(MEANS, **TASK).fit(Z).transform(Z_test)
    ratio = np.mean((denoiser.transform(Z_test) - X_test) ** 2) / np.mean((bayes - X_test) ** 2)
    assert ratio < 1.03  # measured 1.012


def test_a_start_that_fools_sure_does_not_replace_the_wiener_map():
    # One residual head on three components of norms 0, 5 and 7 (the study's
    # unequal_norms task, 2,000 points): trained by SURE, the construction
    # reached a negative training SURE and, kept on a held-out SURE of -0.03
    # (the Wiener map's: 0.06), was 3.4 times the Wiener map's error on new
    # points. A held-out SURE below zero rules a start out.
    from sk_softmix.study._tasks import UNEQUAL_NORMS

    Z, X, _ = make_gaussian_mixture(2_000, **UNEQUAL_NORMS, random_state=0)
    rows = np.random.default_rng(1).permutation(len(Z))
    train, test = rows[:1600], rows[1600:]
    common = {"n_heads": 1, "noise_variance": 1.0, "n_components": 3}
    denoiser = SoftmaxAttentionDenoiser(random_state=0, **common).fit(Z[train])
    wiener = SoftmaxAttentionDenoiser(max_iter=0, **common).fit(Z[train])
    error = np.mean((denoiser.transform(Z[test]) - X[test]) ** 2)
    reference = np.mean((wiener.transform(Z[test]) - X[test]) ** 2)
    assert error < 1.1 * reference


def test_transform_attends_over_a_new_prompt():
    rng = np.random.default_rng(2)
    Z, X = rng.normal(size=(60, 2)), rng.normal(size=(60, 2))
    denoiser = SoftmaxAttentionDenoiser(init="random", max_iter=3, random_state=0).fit(Z, X)
    new_prompt = rng.normal(size=(40, 2)) + 3
    queries = rng.normal(size=(5, 2))
    swapped = SoftmaxAttentionDenoiser(init="random", max_iter=3, random_state=0).fit(Z, X)
    swapped.prompt_ = new_prompt
    np.testing.assert_allclose(
        denoiser.transform(queries, prompt=new_prompt), swapped.transform(queries), rtol=1e-12
    )
    assert not np.allclose(
        denoiser.transform(queries, prompt=new_prompt), denoiser.transform(queries)
    )
    with pytest.raises(ValueError, match="prompt has 3 features"):
        denoiser.transform(queries, prompt=np.ones((4, 3)))
    with pytest.raises(ValueError, match="NaN"):
        denoiser.transform(queries, prompt=np.full((4, 2), np.nan))


def test_denoising_tasks_are_admissible():
    tasks = list(make_denoising_tasks(20, 500, 3, mean_norm=3.0, random_state=0))
    assert len(tasks) == 20
    for Z, X, means, weights in tasks:
        assert Z.shape == X.shape == (500, 3)
        np.testing.assert_allclose(np.linalg.norm(means, axis=1), 3.0)
        assert weights.sum() == pytest.approx(1.0) and np.all(weights >= 0)
    # 20 tasks x 500 points x 3 features of N(0, 4) noise: the variance of Z - X
    # is estimated to within a few percent
    noise = np.concatenate([(Z - X).ravel() for Z, X, _, _ in tasks])
    assert noise.var() == pytest.approx(4.0, rel=0.03)
    first = next(make_denoising_tasks(1, 10, 2, random_state=1))[0]
    np.testing.assert_array_equal(first, next(make_denoising_tasks(1, 10, 2, random_state=1))[0])
    with pytest.raises(ValueError, match="'n_features' parameter"):
        next(make_denoising_tasks(1, 10, 0))


def meta_train(denoiser, n_tasks):
    """partial_fit over tasks with its default decaying step, the way a user writes it."""
    for Z, X, _, _ in make_denoising_tasks(n_tasks, 2_000, 2, random_state=0):
        denoiser.partial_fit(Z, X)
    return denoiser


@pytest.mark.slow
def test_meta_trained_weights_denoise_new_tasks_in_context():
    """Proposition 4.4 at finite prompts: shared weights, task-specific prompts."""
    softmax = meta_train(SoftmaxAttentionDenoiser(random_state=0), 200)
    linear = meta_train(LinearAttentionDenoiser(random_state=0), 200)
    assert softmax.n_iter_ == 200 * 8  # one pass of 8 minibatches per task
    ratios = {}
    for prompt_length in (500, 2_000, 8_000):
        rows = []
        tasks = make_denoising_tasks(50, prompt_length + 2_000, 2, random_state=1)
        for Z, X, means, weights in tasks:
            prompt, queries, clean = Z[:prompt_length], Z[prompt_length:], X[prompt_length:]
            bayes = BayesDenoiser(means, weights, **TASK).fit(queries).transform(queries)
            risk = np.mean((bayes - clean) ** 2)
            row = [
                np.mean((softmax.transform(queries, prompt=prompt) - clean) ** 2) / risk,
                np.mean((linear.transform(queries, prompt=prompt) - clean) ** 2) / risk,
            ]
            if prompt_length == 2_000:
                refit = GaussianMixtureDenoiser(noise_variance=4.0, random_state=0).fit(prompt)
                row.append(np.mean((refit.transform(queries) - clean) ** 2) / risk)
            rows.append(row)
        ratios[prompt_length] = np.mean(rows, axis=0)
    # Measured: softmax 1.096, 1.043, 1.025 over Bayes at 500, 2,000, 8,000
    # prompt points; a GaussianMixtureDenoiser refit per task 1.019 at 2,000;
    # linear attention about 1.8 at every length. (The population construction
    # is about 22% above Bayes at 2,000 points.)
    assert ratios[2_000][0] < 1.05
    assert ratios[500][0] > ratios[2_000][0] > ratios[8_000][0]
    assert ratios[2_000][2] < ratios[2_000][0]  # the per-task refit is the reference
    assert all(ratio[1] > 1.5 for ratio in ratios.values())


def test_partial_fit_continues_and_rejects_other_feature_counts():
    tasks = list(make_denoising_tasks(3, 300, 2, random_state=3))
    denoiser = SoftmaxAttentionDenoiser(batch_size=100, random_state=0)
    denoiser.partial_fit(*tasks[0][:2])
    assert denoiser.n_iter_ == 3 and len(denoiser.optimizer_state_) == 3  # U, V, skip
    first_U = denoiser.U_.copy()
    denoiser.partial_fit(*tasks[1][:2])
    assert denoiser.n_iter_ == 6 and not np.array_equal(denoiser.U_, first_U)
    np.testing.assert_array_equal(denoiser.prompt_, tasks[1][0])  # the last task's prompt
    before = denoiser.transform(tasks[2][0])
    with pytest.raises(ValueError, match="X has 3 features"):
        denoiser.partial_fit(np.ones((10, 3)), np.ones((10, 3)))
    with pytest.raises(ValueError, match="noise_variance"):
        denoiser.set_params(noise_variance=-1.0).partial_fit(tasks[2][0])
    denoiser.set_params(noise_variance=None)
    np.testing.assert_array_equal(denoiser.transform(tasks[2][0]), before)
    # a full fit starts over: fresh weights and no carried Adam moments
    denoiser.fit(*tasks[2][:2])
    assert denoiser.n_iter_ <= 2 * denoiser.max_iter  # two starts
    assert not hasattr(denoiser, "optimizer_state_")
