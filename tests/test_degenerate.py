"""Well-formed but awkward data: a correct answer, a warning, or a clear error.

A property test runs every estimator, with each of its starts, on a grid of
awkward data (constant columns, repeated rows, two points, more features
than points, scales from 1e-150 to 1e150, noise variances from 1e-12 to
1e12 times the data's, separable classes) and checks what must hold on all
of them: the output is finite and near the data, a default denoiser is not
worse than doing nothing when ``noise_variance`` is right, any error is a
``ValueError`` that names the problem, and the answer is scale-equivariant.
The tests after it pin down the cases reported in issue 13, one each.
"""

import copy
import itertools
import warnings

import numpy as np
import pytest
import torch
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.attention import softmax_attention
from sk_softmix.datasets import make_denoising_tasks, make_gaussian_mixture
from sk_softmix.theory.constructions import in_context_construction

MEANS = np.array([[3.0, 0.0, 1.0], [0.0, 3.0, -1.0]])
NOISE_VARIANCE = 1.0
FAST = {"max_iter": 5, "batch_size": 64, "device": "cpu", "random_state": 0}

DENOISERS = {
    **{
        f"softmax-{'res' if residual else 'plain'}{heads}-{init}": (
            lambda xi2, residual=residual, heads=heads, init=init: SoftmaxAttentionDenoiser(
                n_heads=heads, residual=residual, init=init, noise_variance=xi2, **FAST
            )
        )
        for residual, heads, init in itertools.product(
            (True, False), (1, 2), ("auto", "linear", "bayes", "random")
        )
        if residual or heads == 2 or init != "linear"  # one plain head has no linear start
    },
    # this package's key-bias heads, from the construction and by default
    "softmax-key-offset-auto": lambda xi2: SoftmaxAttentionDenoiser(
        key_bias="offset", noise_variance=xi2, **FAST
    ),
    "softmax-key-norm-bayes": lambda xi2: SoftmaxAttentionDenoiser(
        1, key_bias="norm", init="bayes", noise_variance=xi2, **FAST
    ),
    **{
        f"linear-{init}": (
            lambda xi2, init=init: LinearAttentionDenoiser(init=init, noise_variance=xi2, **FAST)
        )
        for init in ("auto", "linear", "bayes", "random")
    },
    "gmm": lambda xi2: GaussianMixtureDenoiser(noise_variance=xi2, random_state=0),
}
# Random weights are not a denoiser until trained: no risk bound for them.
RISK_CHECKED = [name for name in DENOISERS if not name.endswith("random")]
CLASSIFIERS = {
    init: (lambda init=init: SoftmaxAttentionClassifier(init=init, **FAST))
    for init in ("auto", "lda", "zero", "bayes", "random")
}


def _mixture(n, seed=0):
    Z, X, labels = make_gaussian_mixture(
        n, MEANS, covariance=1.0, noise_variance=NOISE_VARIANCE, random_state=seed
    )
    return Z, X, labels


def _constant_column(n):
    Z, X, labels = _mixture(n)
    return np.column_stack([Z, np.full(n, 5.0)]), np.column_stack([X, np.full(n, 5.0)]), labels


def _repeated_rows(n):
    Z, X, labels = _mixture(n // 4)
    return np.repeat(Z, 4, axis=0), np.repeat(X, 4, axis=0), np.repeat(labels, 4)


def _wide(n):
    Z, X, labels = _mixture(n)
    rng = np.random.default_rng(1)
    extra = rng.normal(size=(n, 20))
    return np.column_stack([Z, extra]), np.column_stack([X, extra]), labels


GENERATORS = {
    "mixture": lambda: _mixture(200),
    "constant-column": lambda: _constant_column(200),
    "repeated-rows": lambda: _repeated_rows(200),
    "two-points": lambda: _mixture(2),
    "more-features-than-points": lambda: _wide(12),
}
SCALES = (1e-150, 1.0, 1e150)
# right, and misspecified by far in both directions (times the data's variance)
NOISE_FACTORS = (None, 1e-12, 1e12)


def _fit_quietly(estimator, *args):
    """Fit, returning the warnings raised; a ValueError must name its problem."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(*args)
    return [str(w.message) for w in caught]


def _check_near_the_data(output, Z, queries):
    """Finite and within ten radii of the data's centre (a radius: the largest
    sup-norm distance of a prompt point or query from it)."""
    assert np.all(np.isfinite(output))
    centre = Z.mean(axis=0)
    radius = max(np.abs(Z - centre).max(), np.abs(queries - centre).max())
    assert np.abs(output - centre).max() <= 10 * radius + 1e-300


CASES = list(itertools.product(GENERATORS, SCALES, NOISE_FACTORS))


@pytest.mark.parametrize("name", DENOISERS)
def test_denoisers_on_awkward_data(name):
    """Every denoiser and start on every generator, scale and noise variance."""
    make = DENOISERS[name]
    for generator, scale, factor in CASES:
        Z, X, _ = GENERATORS[generator]()
        Z, X = Z * scale, X * scale
        data_variance = float(np.mean(np.var(Z / scale, axis=0))) * scale**2
        xi2 = NOISE_VARIANCE * scale**2 if factor is None else factor * data_variance
        if generator == "two-points" and name == "gmm":
            continue  # two components need two points: a clear error, tested below
        estimator = make(xi2)
        try:
            _fit_quietly(estimator, Z)
        except ValueError as error:
            assert "noise_variance" in str(error) or "root-mean-square" in str(error), (
                generator,
                scale,
                factor,
                str(error),
            )
            continue
        queries = Z[:20]
        output = estimator.transform(queries)
        _check_near_the_data(output, Z, queries)
        if factor is None and name != "gmm":
            # with clean targets nothing falls back: every start is used as built
            supervised = make(xi2)
            _fit_quietly(supervised, Z, X)
            _check_near_the_data(supervised.transform(queries), Z, queries)
        if (
            factor is None
            and name in RISK_CHECKED
            and generator in ("mixture", "constant-column", "repeated-rows")
        ):
            # 200 points: a start fitted on them is no worse than the
            # identity beyond the sampling noise of the risk (about 10%)
            risk = np.mean((output - X[:20]) ** 2)
            identity = np.mean((queries - X[:20]) ** 2)
            assert risk <= 1.25 * identity, (generator, scale, risk, identity)


@pytest.mark.parametrize("name", DENOISERS)
@pytest.mark.parametrize("scale", [1e-100, 1e100, 3.7e-7])
def test_denoisers_are_scale_equivariant(name, scale):
    Z, _, _ = _mixture(200)
    reference = DENOISERS[name](NOISE_VARIANCE)
    scaled = DENOISERS[name](NOISE_VARIANCE * scale**2)
    _fit_quietly(reference, Z)
    _fit_quietly(scaled, Z * scale)
    expected = reference.transform(Z[:50])
    got = scaled.transform(Z[:50] * scale) / scale
    assert np.max(np.abs(got - expected)) <= 1e-6 * np.max(np.abs(expected))


def _separable(n):
    rng = np.random.default_rng(2)
    labels = np.arange(n) % 2
    # 20 standard deviations apart (root-mean-square 5: 1e150 times it is still representable)
    return 0.5 * rng.normal(size=(n, 2)) + 5.0 * (2 * labels[:, None] - 1), None, labels


CLASSIFICATION_DATA = {
    **{name: make for name, make in GENERATORS.items() if name != "two-points"},
    "separable": lambda: _separable(100),
}


@pytest.mark.parametrize("init", CLASSIFIERS)
def test_classifier_on_awkward_data(init):
    for generator, scale in itertools.product(CLASSIFICATION_DATA, SCALES):
        Z, _, labels = CLASSIFICATION_DATA[generator]()
        classifier = CLASSIFIERS[init]()
        _fit_quietly(classifier, Z * scale, labels)
        decision = classifier.decision_function(Z * scale)
        assert np.all(np.isfinite(decision))
        assert np.all(np.isfinite(classifier.predict_proba(Z * scale)))
        if generator == "separable":
            assert classifier.score(Z * scale, labels) == 1.0, (init, scale)


@pytest.mark.parametrize("init", CLASSIFIERS)
@pytest.mark.parametrize("scale", [1e-100, 1e100, 3.7e-7])
def test_classifier_is_scale_invariant(init, scale):
    Z, _, labels = _mixture(200)
    reference, scaled = CLASSIFIERS[init](), CLASSIFIERS[init]()
    _fit_quietly(reference, Z, labels)
    _fit_quietly(scaled, Z * scale, labels)
    expected = reference.decision_function(Z)
    got = scaled.decision_function(Z * scale)
    assert np.max(np.abs(got - expected)) <= 1e-6 * np.max(np.abs(expected))


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_unrepresentable_scale_is_named(scale):
    Z, X, labels = _mixture(100)
    for estimator, args in [
        (SoftmaxAttentionClassifier(**FAST), (Z * scale, labels)),
        (SoftmaxAttentionDenoiser(**FAST), (Z * scale, X * scale)),
        (LinearAttentionDenoiser(**FAST), (Z * scale, X * scale)),
    ]:
        with pytest.raises(ValueError, match="root-mean-square of X is"):
            estimator.fit(*args)
        assert not hasattr(estimator, "n_features_in_")  # a failed fit changes nothing
    with pytest.raises(ValueError, match="root-mean-square of X is"):
        GaussianMixtureDenoiser(noise_variance=1.0).fit(Z * scale)


# -- the cases of issue 13, one by one ----------------------------------------


def test_constant_feature_comes_back_constant():
    Z, X, _ = _constant_column(400)
    for y in (None, X):  # by SURE (which warns: no minimum along it) and supervised
        denoiser = SoftmaxAttentionDenoiser(noise_variance=NOISE_VARIANCE, random_state=0)
        messages = _fit_quietly(denoiser, Z, y)
        output = denoiser.transform(Z)
        np.testing.assert_allclose(output[:, -1], 5.0, rtol=1e-6)
        # the other columns are still denoised
        assert np.mean((output[:, :-1] - X[:, :-1]) ** 2) < np.mean((Z[:, :-1] - X[:, :-1]) ** 2)
        if y is None:
            assert any("1 direction(s) with a variance below" in m for m in messages)


def test_identical_rows_come_back():
    Z = np.tile([[1.0, -2.0]], (20, 1))
    denoiser = SoftmaxAttentionDenoiser(noise_variance=1.0)
    with pytest.warns(UserWarning, match="exceeds the variance of X per entry, 0"):
        denoiser.fit(Z)
    np.testing.assert_allclose(denoiser.transform(Z[:3]), Z[:3])


@pytest.mark.parametrize("n", [5, 8])
def test_too_few_points_warn(n):
    Z, _, _ = _mixture(n)
    with pytest.warns(UserWarning, match=f"X holds {n} points of 3 features"):
        SoftmaxAttentionDenoiser(noise_variance=NOISE_VARIANCE).fit(Z)


@pytest.mark.parametrize("factor", [40.0 / 6.0, 1e12])
@pytest.mark.parametrize(
    "make",
    [
        lambda xi2: SoftmaxAttentionDenoiser(noise_variance=xi2, init="random", random_state=0),
        lambda xi2: SoftmaxAttentionDenoiser(noise_variance=xi2, random_state=0),
        lambda xi2: LinearAttentionDenoiser(noise_variance=xi2),
        lambda xi2: GaussianMixtureDenoiser(noise_variance=xi2, random_state=0),
    ],
)
def test_noise_variance_above_the_data_variance(make, factor):
    """Warned with both numbers; the answer shrinks and never exceeds the data."""
    Z, X, _ = _mixture(400)
    variance = float(np.mean(np.var(Z, axis=0)))
    denoiser = make(factor * variance)
    with pytest.warns(UserWarning, match=f"exceeds the variance of X per entry, {variance:.4g}"):
        denoiser.fit(Z)
    output = denoiser.transform(Z)
    mean = Z.mean(axis=0)
    if isinstance(denoiser, LinearAttentionDenoiser):
        mean = np.zeros_like(mean)  # no constant: it shrinks to 0
    # the clipped plug-in answer: close to the mean, far inside the data
    assert np.abs(output - mean).max() <= 0.5 * np.abs(Z - mean).max()


def test_tiny_noise_variance_is_the_identity():
    Z, _, _ = _mixture(200)
    variance = float(np.mean(np.var(Z, axis=0)))
    denoiser = SoftmaxAttentionDenoiser(noise_variance=1e-12 * variance)
    with pytest.warns(UserWarning, match="too small to train on in float32"):
        denoiser.fit(Z)
    np.testing.assert_allclose(denoiser.transform(Z), Z, rtol=1e-6, atol=1e-9)


def test_construction_averages_where_the_covariance_is_below_the_noise():
    """Proposition 4.4's head is unchanged on S > xi^2 I and finite below it."""
    S = np.diag([5.0, 1e-6])
    U, V, skip = in_context_construction(S, 4.0)
    np.testing.assert_allclose(np.diag(U), [0.2, 0.0])
    np.testing.assert_allclose(np.diag(V), [0.8, 1.0])
    np.testing.assert_allclose(np.diag(skip), [1 - 1.6, 0.0])
    full = in_context_construction(np.array([[6.0, 1.0], [1.0, 5.0]]), 4.0)
    precision = np.linalg.inv([[6.0, 1.0], [1.0, 5.0]])
    np.testing.assert_allclose(full[0], precision, rtol=1e-12)
    np.testing.assert_allclose(full[2], np.eye(2) - 8.0 * precision, rtol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_separable_classes_bayes_start(seed):
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(-100, 1, (50, 2)), rng.normal(100, 1, (50, 2))]
    y = np.r_[np.zeros(50), np.ones(50)]
    classifier = SoftmaxAttentionClassifier(init="bayes", random_state=seed).fit(X, y)
    assert classifier.score(X, y) == 1.0
    assert np.all(np.isfinite(classifier.decision_function(X)))


def test_classifier_bayes_start_on_a_constant_feature():
    Z, _, labels = _mixture(300)
    X = np.column_stack([Z, np.ones(len(Z))])
    lda = LinearDiscriminantAnalysis().fit(X, labels).score(X, labels)
    classifier = SoftmaxAttentionClassifier(init="bayes", random_state=0).fit(X, labels)
    assert classifier.score(X, labels) >= lda - 0.02  # LDA handles it; so does the start


def test_classifier_bayes_start_with_more_features_than_samples():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(50, 500)), np.arange(50) % 2
    classifier = SoftmaxAttentionClassifier(init="bayes", max_iter=0).fit(X, y)
    decision = classifier.decision_function(X)
    # before: values near 1e15 from inverting a rank-48 covariance
    assert np.all(np.isfinite(decision)) and np.abs(decision).max() < 1e4


def test_classifier_bayes_start_falls_back_with_a_warning(monkeypatch):
    import sk_softmix.classification._starts as module

    def no_construction(*args):
        raise ValueError("no v21 exists")

    monkeypatch.setattr(module, "bayes_heads", no_construction)
    Z, _, labels = _mixture(200)
    classifier = SoftmaxAttentionClassifier(init="bayes", max_iter=0)
    with pytest.warns(UserWarning, match="starting from the linear start"):
        classifier.fit(Z, labels)
    assert classifier.init_ == "lda"
    lda = LinearDiscriminantAnalysis().fit(Z, labels)
    np.testing.assert_allclose(classifier.decision_function(Z), lda.decision_function(Z), atol=1e-6)


@pytest.mark.parametrize("scale", [1e154, 1e160, 1e200, 1e300])
def test_engine_past_float64_scores(scale):
    """Scores beyond float64: the softmax of the true scores, never NaN."""
    prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64) * scale
    queries = torch.tensor([[1.0, 0.2], [0.5, 0.5001]], dtype=torch.float64) * scale
    eye = torch.eye(2, dtype=torch.float64)
    out = softmax_attention(queries, prompt, eye, eye)
    # the largest score wins outright at these magnitudes
    torch.testing.assert_close(out, torch.stack([prompt[0], prompt[1]]))
    left_out = softmax_attention(queries, prompt, eye, eye, exclude=torch.tensor([0, -1]))
    torch.testing.assert_close(left_out[0], prompt[2])


def test_engine_with_no_queries():
    prompt = torch.randn(5, 2)
    heads = torch.eye(2).expand(3, 2, 2)
    out = softmax_attention(torch.zeros(0, 2), prompt, heads, heads)
    assert out.shape == (3, 0, 2)


def test_engine_overflowing_transform_is_named():
    prompt = torch.ones(4, 2, dtype=torch.float64)
    U = torch.eye(2, dtype=torch.float64) * 1e300
    with pytest.raises(ValueError, match="U z or the prompt overflows"):
        softmax_attention(torch.full((1, 2), 1e300, dtype=torch.float64), prompt, U, U)


def test_interrupted_partial_fit_keeps_the_adam_moments(monkeypatch):
    tasks = list(make_denoising_tasks(3, 256, 2, random_state=0))
    denoiser = SoftmaxAttentionDenoiser(random_state=0).partial_fit(tasks[0][0], tasks[0][1])
    saved = copy.deepcopy(denoiser.optimizer_state_)
    twin = copy.deepcopy(denoiser)
    import sk_softmix.training._solvers as training

    original = training._first_order_loop

    def interrupted(step, *args, **kwargs):
        step(0)  # one Adam step updates the moments in place ...
        raise KeyboardInterrupt  # ... then Ctrl-C

    monkeypatch.setattr(training, "_first_order_loop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        denoiser.partial_fit(tasks[1][0], tasks[1][1])
    monkeypatch.setattr(training, "_first_order_loop", original)
    for state, before in zip(denoiser.optimizer_state_, saved, strict=True):
        for key in before:
            np.testing.assert_array_equal(state[key], before[key])
    # and the next call continues exactly as if nothing had happened
    denoiser.partial_fit(tasks[1][0], tasks[1][1])
    twin.partial_fit(tasks[1][0], tasks[1][1])
    np.testing.assert_array_equal(denoiser.U_, twin.U_)


def test_shallow_copy_partial_fit_leaves_the_original():
    tasks = list(make_denoising_tasks(2, 256, 2, random_state=0))
    denoiser = SoftmaxAttentionDenoiser(random_state=0).partial_fit(tasks[0][0], tasks[0][1])
    before = copy.deepcopy(denoiser.__dict__)
    copy.copy(denoiser).partial_fit(tasks[1][0], tasks[1][1])
    np.testing.assert_array_equal(denoiser.U_, before["U_"])
    for state, saved in zip(denoiser.optimizer_state_, before["optimizer_state_"], strict=True):
        for key in saved:
            np.testing.assert_array_equal(state[key], saved[key])


def test_bayes_denoiser_owns_its_means():
    means = np.array([[3.0, 0.0], [0.0, 3.0]])
    denoiser = BayesDenoiser(means).fit(np.zeros((1, 2)))
    before = denoiser.transform(np.ones((1, 2)))
    means[0, 0] = 100.0
    np.testing.assert_array_equal(denoiser.transform(np.ones((1, 2))), before)


def test_construction_start_that_overfits_sure_falls_back_with_a_warning():
    """40 points in 10 dimensions: SURE trained from the construction ran to
    test MSE 6e9 (the identity's: 1.0); the linear start validates better."""
    rng = np.random.default_rng(0)
    X = 0.1 * rng.normal(size=(40, 10))
    Z = X + rng.normal(size=X.shape)
    X_test = 0.1 * rng.normal(size=(500, 10))
    Z_test = X_test + rng.normal(size=X_test.shape)
    denoiser = SoftmaxAttentionDenoiser(noise_variance=1.0, init="bayes", random_state=0)
    with pytest.warns(UserWarning, match="scored worse on the held-out points"):
        denoiser.fit(Z)
    assert denoiser.init_ == "linear"
    assert np.mean((denoiser.transform(Z_test) - X_test) ** 2) < np.mean((Z_test - X_test) ** 2)


@pytest.mark.parametrize("dtype", [bool, np.uint8])
def test_repeated_rows_of_binary_data_are_not_trained_on_by_sure(dtype):
    """Binary data repeats rows, which Gaussian noise cannot: SURE there has no
    minimum (outputs reached 10.5 on 0/1 data), so the Wiener map is kept."""
    data = (np.random.default_rng(0).random((300, 4)) < 0.5).astype(dtype)
    denoiser = SoftmaxAttentionDenoiser(noise_variance=0.05, random_state=0)
    with pytest.warns(UserWarning, match="rows of X repeat earlier ones"):
        denoiser.fit(data)
    output = denoiser.transform(data.astype(np.float64))
    assert output.min() >= -0.5 and output.max() <= 1.5
    assert np.mean((output - data) ** 2) < 0.05  # no worse than the claimed noise


def test_bayes_denoiser_is_scale_equivariant():
    Z, _, _ = _mixture(100)
    for scale in (1e-100, 1e100, 3.7e-7):
        reference = BayesDenoiser(MEANS, covariance=1.0, noise_variance=1.0).fit(Z)
        scaled = BayesDenoiser(MEANS * scale, covariance=scale**2, noise_variance=scale**2)
        got = scaled.fit(Z * scale).transform(Z * scale) / scale
        np.testing.assert_allclose(got, reference.transform(Z), rtol=1e-6, atol=1e-12)
