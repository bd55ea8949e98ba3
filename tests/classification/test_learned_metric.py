"""The kernel heads' learned metric: ``U11 = W = A^T A / h^2``.

The loss the metric is fitted on is the heads' leave-one-out log-loss
(checked against the engine's votes at the isotropic start); a metric
learned where only two of eight features carry the classes weighs those
two, and the classifier keeps it only where it beats the isotropic heads.
"""

import copy

import numpy as np
import pytest
import torch

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._heads import classifier_tokens, label_blocks
from sk_softmix.classification._kernel_head import kernel_heads, kernel_votes
from sk_softmix.classification._linear_starts import score_losses
from sk_softmix.classification._metric import (
    learn_metric,
    metric_loss,
    metric_loss_and_gradient,
    metric_matrix,
    metric_start,
)


def _xor_in_noise(n, rng, n_noise=6):
    """XOR of the signs of two features, beside ``n_noise`` features of noise:
    an isotropic kernel spends its bandwidth on the noise."""
    X = rng.normal(size=(n, 2 + n_noise))
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(int)
    return X, y


def test_the_metric_loss_is_the_heads_leave_one_out_loss():
    # at A = I / h the loss is that of the engine's leave-one-out vote
    rng = np.random.default_rng(0)
    X, y = _xor_in_noise(150, rng)
    linear = rng.normal(0, 0.5, (150, 1))
    h, beta = 0.9, 2.5
    A = torch.as_tensor(metric_start(X, h, "full", 8))
    features = torch.as_tensor(X)
    loss = metric_loss(
        A, torch.tensor(np.log(beta), dtype=torch.float64), features,
        torch.as_tensor(2.0 * y[:, None] - 1), torch.as_tensor(y), torch.as_tensor(linear),
        torch.zeros(150, dtype=torch.float64),
    )  # fmt: skip
    prompt = classifier_tokens(features, torch.as_tensor(y), 2)
    votes = kernel_votes(features, prompt, 2, h, exclude=torch.arange(150)).numpy()
    expected = score_losses(linear + beta * votes, y).mean()
    assert float(loss) == pytest.approx(expected, rel=1e-12)
    # the diagonal start is the same kernel
    np.testing.assert_array_equal(np.diag(metric_start(X, h, "diagonal", 8)), A.numpy())


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("form", ["diagonal", "full"])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_written_out_gradient_is_autograds(n_classes, form, weighted):
    # the fit runs on the written-out gradient; autograd of the loss is the
    # reference, to float64 rounding
    generator = torch.Generator().manual_seed(n_classes + 2 * weighted)
    n, d = 60, 5
    features = torch.randn(n, d, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, n_classes, (n,), generator=generator)
    blocks = torch.as_tensor(np.asarray(label_blocks(labels.numpy(), n_classes), dtype=float))
    linear = torch.randn(n, blocks.shape[1], generator=generator, dtype=torch.float64)
    weights = None
    log_weights = torch.zeros(n, dtype=torch.float64)
    if weighted:
        weights = 0.2 + torch.rand(n, generator=generator, dtype=torch.float64)
        log_weights = weights.log()
    shape = (d,) if form == "diagonal" else (3, d)
    parameters = (
        0.5 + torch.rand(shape, generator=generator, dtype=torch.float64)
    ).requires_grad_()
    log_readout = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    loss = metric_loss(
        metric_matrix(parameters), log_readout, features, blocks, labels, linear, log_weights,
        weights,
    )  # fmt: skip
    loss.backward()
    written = metric_loss_and_gradient(
        parameters.detach(), log_readout.detach(), features, blocks, labels, linear,
        log_weights, weights,
    )  # fmt: skip
    assert float(written[0]) == pytest.approx(float(loss), rel=1e-12)
    np.testing.assert_allclose(written[1].numpy(), parameters.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert float(written[2]) == pytest.approx(float(log_readout.grad), rel=1e-10)


def test_the_diagonal_metric_weighs_the_features_that_matter():
    rng = np.random.default_rng(1)
    X, y = _xor_in_noise(400, rng)
    A, scales, readout = learn_metric(
        X, y, 2, np.zeros((400, 1)), 1.0, 1.0, "diagonal", 8, torch.device("cpu")
    )
    np.testing.assert_array_equal(A, np.diag(scales))
    # the two XOR features get scales well above every noise feature's
    assert np.abs(scales[:2]).min() > 2 * np.abs(scales[2:]).max()
    assert readout > 0


def test_a_full_metric_of_low_rank():
    rng = np.random.default_rng(2)
    X, y = _xor_in_noise(300, rng)
    A, parameters, _ = learn_metric(
        X, y, 2, np.zeros((300, 1)), 1.0, 1.0, "full", 2, torch.device("cpu")
    )
    assert A.shape == (2, 8)
    np.testing.assert_array_equal(A, parameters)
    # its two rows span mostly the XOR features
    share = np.square(A[:, :2]).sum() / np.square(A).sum()
    assert share > 0.8


def test_the_classifier_keeps_a_metric_that_beats_the_isotropic_heads():
    rng = np.random.default_rng(3)
    X, y = _xor_in_noise(600, rng)
    X_test, y_test = _xor_in_noise(3000, rng)
    learned = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    plain = SoftmaxAttentionClassifier(metric="isotropic", random_state=0).fit(X, y)
    assert learned.init_ == "kernel"
    assert learned.metric_.shape == (8, 8) and not np.allclose(learned.metric_, np.eye(8))
    np.testing.assert_array_equal(plain.metric_, np.eye(8))
    # U11 = W = A^T A / h^2 for every head
    gram = learned.metric_.T @ learned.metric_
    h2 = np.trace(gram) / np.trace(learned.U11_[0])
    np.testing.assert_allclose(learned.U11_[0], gram / h2, rtol=1e-12)
    np.testing.assert_array_equal(learned.W_, learned.U11_)
    # 3,000 test points: the accuracy's standard error is under 0.01
    assert learned.score(X_test, y_test) > plain.score(X_test, y_test) + 0.03


def test_no_metric_is_kept_where_the_features_matter_alike():
    # rings in 2-D: every feature matters the same, the isotropic kernel is right
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 2))
    y = (np.sqrt(np.square(X).sum(axis=1)) > 1.2).astype(int)
    model = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    assert model.init_ == "kernel"
    np.testing.assert_array_equal(model.metric_, np.eye(2))


@pytest.mark.parametrize("metric", ["diagonal", "full"])
def test_forced_metrics_and_their_neighbour_path(metric):
    # the restricted vote over every token is the exact one, in the learned
    # features too: the fitted model predicted both ways
    rng = np.random.default_rng(5)
    X, y = _xor_in_noise(300, rng)
    X_test, _ = _xor_in_noise(200, rng)
    exact = SoftmaxAttentionClassifier(metric=metric, metric_rank=3, random_state=0).fit(X, y)
    assert exact.init_ == "kernel"
    assert exact.metric_.shape == ((8, 8) if metric == "diagonal" else (3, 8))
    restricted = copy.deepcopy(exact)
    restricted.n_neighbors_ = len(exact.prompt_X_)
    # float32 engine against float64 neighbour votes
    np.testing.assert_allclose(
        restricted.decision_function(X_test), exact.decision_function(X_test), atol=1e-4
    )


def test_kernel_heads_of_a_metric():
    A = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]])
    heads = kernel_heads(3, 3, [0.5, 2.0], [1.0, 3.0], A)
    np.testing.assert_allclose(heads["U11"][0], A.T @ A / 0.25)
    np.testing.assert_allclose(heads["W"][1], A.T @ A / 4.0)


def test_a_fit_that_overflows_keeps_its_start(monkeypatch):
    # a loss that goes non-finite leaves the isotropic start, not NaN
    import sk_softmix.classification._metric as metric_module

    finite = metric_module.metric_loss_and_gradient

    def overflowing(*args, **kwargs):
        loss, gradient, readout_gradient = finite(*args, **kwargs)
        return loss * torch.inf, gradient * torch.nan, readout_gradient * torch.nan

    monkeypatch.setattr(metric_module, "metric_loss_and_gradient", overflowing)
    rng = np.random.default_rng(6)
    X, y = _xor_in_noise(100, rng)
    A, scales, readout = learn_metric(
        X, y, 2, np.zeros((100, 1)), 2.0, 3.0, "diagonal", 8, torch.device("cpu")
    )
    np.testing.assert_array_equal(scales, np.full(8, 0.5))
    assert readout == 3.0


def test_no_metric_is_tried_with_fewer_queries_than_features():
    # 80 points in 62 features: each half has 40 queries for 62 scales
    rng = np.random.default_rng(7)
    X, y = _xor_in_noise(80, rng, n_noise=60)
    model = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.metric_, np.eye(62))


def test_the_heads_of_a_kept_metric_are_judged_by_cross_fitted_losses():
    # each tuning query's held-out loss comes from the metric fitted on the
    # other half: recomputed here from the same draw, query by query
    from sk_softmix.classification._kernel_head import fit_kernel_heads
    from sk_softmix.classification._metric import JUDGING_BANDWIDTHS, metric_for_heads

    rng = np.random.default_rng(5)
    X, y = _xor_in_noise(300, rng)
    linear = np.zeros((300, 1))
    device = torch.device("cpu")
    tuning = dict(prompt_indices=np.arange(300), n_heads=1, n_neighbors=None, left_in=None)
    isotropic = fit_kernel_heads(
        X, y, 2, linear_scores=linear, random_state=np.random.RandomState(0), device=device,
        **tuning,
    )  # fmt: skip
    choice = metric_for_heads(
        "auto", 8, X, y, 2, linear, isotropic, np.random.RandomState(1), device, **tuning
    )
    assert choice.metric is not None
    assert choice.held_out_losses.shape == (300,)
    assert choice.learned_loss == pytest.approx(choice.held_out_losses.mean(), rel=1e-12)
    # the same draw of halves; the metric fitted on the first judges the second
    rows = np.random.RandomState(1).permutation(isotropic.tuning_rows)
    first, second = np.array_split(rows, 2)
    first = np.sort(first)
    A, _, _ = learn_metric(
        X[first], y[first], 2, linear[first],
        1.0 / np.sqrt(isotropic.heads["U11"][0, 0, 0]),
        float(np.ravel(isotropic.heads["v22"])[0]) / isotropic.temperature,
        "diagonal", 8, device,
    )  # fmt: skip
    second = np.sort(second)
    judged = fit_kernel_heads(
        X, y, 2, linear_scores=linear, random_state=np.random.RandomState(0), device=device,
        candidate_rows=second, metric=A, bandwidths=JUDGING_BANDWIDTHS, measure_left_out=False,
        **tuning,
    ).kernel_losses  # fmt: skip
    np.testing.assert_allclose(choice.held_out_losses[second], judged, rtol=1e-10)
    # and they are held out: above the losses of the metric refitted on every query
    refit = fit_kernel_heads(
        X, y, 2, linear_scores=linear, random_state=np.random.RandomState(0), device=device,
        metric=choice.metric, **tuning,
    )  # fmt: skip
    assert choice.held_out_losses.mean() > refit.kernel_losses.mean()
