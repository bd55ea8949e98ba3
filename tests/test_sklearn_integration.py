"""Pipelines, clone, grid search and cross-validation with clean targets y."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_gaussian_mixture

MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])


@pytest.fixture(scope="module")
def data():
    Z, X, _ = make_gaussian_mixture(600, MEANS, covariance=1.0, noise_variance=4.0, random_state=0)
    return Z, X


def small_estimators():
    return [
        SoftmaxAttentionDenoiser(max_iter=20, random_state=0),
        LinearAttentionDenoiser(max_iter=20, random_state=0),
        GaussianMixtureDenoiser(noise_variance=4.0, random_state=0),
        BayesDenoiser(MEANS, covariance=1.0, noise_variance=4.0),
    ]


@pytest.mark.parametrize("estimator", small_estimators(), ids=lambda e: type(e).__name__)
def test_pipeline_clone_and_cross_validation(estimator, data):
    Z, X = data
    # a pipeline step before the denoiser, then the denoiser as final step
    pipeline = make_pipeline(FunctionTransformer(), clone(estimator))
    pipeline.fit(Z, X)
    assert pipeline.predict(Z).shape == Z.shape
    scores = cross_val_score(
        pipeline,
        Z,
        X,
        cv=KFold(3, shuffle=True, random_state=0),
        scoring="neg_mean_squared_error",
    )
    assert np.all(np.isfinite(scores))
    # denoising helps: the MSE is below the noise variance of the raw observations
    assert -scores.mean() < np.mean((Z - X) ** 2)
    np.testing.assert_allclose(
        pipeline.score(Z, X), -np.mean((pipeline.predict(Z) - X) ** 2), rtol=1e-12
    )


def test_grid_search_over_heads_and_learning_rate(data):
    Z, X = data
    search = GridSearchCV(
        SoftmaxAttentionDenoiser(max_iter=20, random_state=0),
        {"n_heads": [1, 2], "learning_rate": [0.01, 0.05]},
        cv=3,
        scoring="neg_mean_squared_error",
    ).fit(Z, X)
    assert set(search.best_params_) == {"n_heads", "learning_rate"}
    assert np.isfinite(search.best_score_)
    assert search.best_estimator_.transform(Z).shape == Z.shape


def test_grid_search_compares_denoisers_in_one_pipeline(data):
    Z, X = data
    pipeline = Pipeline([("denoise", SoftmaxAttentionDenoiser(max_iter=10, random_state=0))])
    search = GridSearchCV(
        pipeline,
        {
            "denoise": [
                SoftmaxAttentionDenoiser(max_iter=10, random_state=0),
                LinearAttentionDenoiser(max_iter=10, random_state=0),
                GaussianMixtureDenoiser(noise_variance=4.0, random_state=0),
            ]
        },
        cv=3,
        scoring="neg_mean_squared_error",
    ).fit(Z, X)
    # on a two-cluster mixture the linear denoiser is never the best
    assert not isinstance(search.best_params_["denoise"], LinearAttentionDenoiser)


@pytest.mark.parametrize(
    "Estimator",
    [SoftmaxAttentionDenoiser, LinearAttentionDenoiser],
    ids=lambda c: c.__name__,
)
def test_supervised_contract(Estimator, data):
    """What the check suite cannot test with its 1-D labels, with real targets."""
    Z, X = data
    estimator = Estimator(max_iter=5, random_state=0)
    params = estimator.get_params()
    assert estimator.fit(Z, X) is estimator
    assert estimator.get_params() == params  # fit never mutates parameters
    first = estimator.transform(Z)
    np.testing.assert_array_equal(estimator.fit(Z, X).transform(Z), first)  # idempotent
    # n_iter_ counts every start trained (two for the linear denoiser with y)
    assert estimator.n_features_in_ == 2 and 1 <= estimator.n_iter_ <= 2 * 5
    # rows are denoised independently of each other: order and subsets do not matter
    order = np.random.default_rng(0).permutation(len(Z))
    np.testing.assert_allclose(estimator.transform(Z[order]), first[order], rtol=1e-12)
    np.testing.assert_allclose(estimator.transform(Z[:7]), first[:7], rtol=1e-12)
    # read-only and Fortran-ordered inputs
    frozen_Z, frozen_X = np.asfortranarray(Z), X.copy()
    frozen_Z.setflags(write=False)
    frozen_X.setflags(write=False)
    np.testing.assert_array_equal(
        Estimator(max_iter=5, random_state=0).fit(frozen_Z, frozen_X).transform(Z),
        first,
    )
    # float32 fit gives float32 transform
    assert (
        estimator.fit(Z.astype(np.float32), X.astype(np.float32))
        .transform(Z.astype(np.float32))
        .dtype
        == np.float32
    )
    # a clone is unfitted and equal in parameters
    assert clone(estimator).get_params() == params
    assert not hasattr(clone(estimator), "prompt_")


# -- without clean targets: a denoiser in front of a classifier, and SURE scores


def _noisy_classes(n, random_state):
    """Four classes in 8 dimensions, means on a ring of radius 3, noise xi = 1.5."""
    rng = np.random.default_rng(random_state)
    labels = rng.integers(4, size=n)
    angles = np.pi / 2 * labels
    means = np.zeros((n, 8))
    means[:, 0], means[:, 1] = 3 * np.cos(angles), 3 * np.sin(angles)
    clean = means + 0.5 * rng.normal(size=(n, 8))
    return clean + 1.5 * rng.normal(size=(n, 8)), clean, labels


@pytest.mark.parametrize(
    "denoiser",
    [
        SoftmaxAttentionDenoiser(noise_variance=2.25, max_iter=30, random_state=0),
        LinearAttentionDenoiser(noise_variance=2.25, random_state=0),
        GaussianMixtureDenoiser(noise_variance=2.25, n_components=4, random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_denoiser_in_front_of_a_classifier(denoiser):
    """The Pipeline's labels are not clean targets: the denoiser trains by SURE.

    Each training point is denoised left out of its own prompt
    (``fit_transform``), as test points are, so LDA learns on what it will see.
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    Z, _, labels = _noisy_classes(600, 0)
    pipeline = make_pipeline(clone(denoiser), LinearDiscriminantAnalysis())
    pipeline.fit(Z, labels)
    assert pipeline[0].noise_variance_ == 2.25  # trained without the labels
    folds = KFold(3, shuffle=True, random_state=0)
    denoised = cross_val_score(pipeline, Z, labels, cv=folds).mean()
    noisy = cross_val_score(LinearDiscriminantAnalysis(), Z, labels, cv=folds).mean()
    if isinstance(denoiser, GaussianMixtureDenoiser):
        # the plug-in's four full-covariance components, fitted on 400 points
        # in 8 dimensions, pull points to wrong components: it runs, but
        # measured 0.77 against LDA's 0.81 on the noisy points
        assert denoised > 0.5
    else:
        # 600 points: the accuracy has standard error about 0.02; the trained
        # denoisers must not cost more than that
        assert denoised >= noisy - 0.02


def test_labels_without_noise_variance_say_what_is_needed():
    Z, _, labels = _noisy_classes(100, 0)
    with pytest.raises(ValueError, match=r"got a y of shape \(100,\), not shaped like X"):
        SoftmaxAttentionDenoiser().fit(Z, labels)
    with pytest.raises(ValueError, match=r"got a y of shape \(100,\), not shaped like X"):
        GaussianMixtureDenoiser().fit(Z, labels)


def test_gaussian_mixture_denoiser_estimates_the_noise_from_clean_targets(data):
    Z, X = data
    denoiser = GaussianMixtureDenoiser(random_state=0).fit(Z, X)
    # 1,200 squared noise entries of variance 4: standard error 4 sqrt(2 / 1200) = 0.16
    assert abs(denoiser.noise_variance_ - 4.0) < 0.5


@pytest.mark.parametrize(
    "denoiser",
    [
        SoftmaxAttentionDenoiser(noise_variance=4.0, max_iter=0),
        GaussianMixtureDenoiser(noise_variance=4.0, random_state=0),
        BayesDenoiser(MEANS, covariance=1.0, noise_variance=4.0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_score_without_targets_estimates_the_error(denoiser, data):
    """``score(X)`` is minus SURE: unbiased for minus the MSE on fresh points."""
    Z, _ = data
    Z_test, X_test, _ = make_gaussian_mixture(
        4000, MEANS, covariance=1.0, noise_variance=4.0, random_state=7
    )
    fitted = clone(denoiser).fit(Z)
    # SURE's per-entry spread on this task is about 3: 8,000 entries give a
    # standard error near 0.035 on a risk near 1.5
    assert abs(fitted.score(Z_test) - fitted.score(Z_test, X_test)) < 0.1


def test_grid_search_by_sure_picks_what_clean_targets_pick():
    """GridSearchCV on noisy data alone selects a model whose true error is
    within 2% of the one selected with the clean targets."""
    # SURE's noise grows with xi^2: at xi^2 = 4 and 1,500 points it could not
    # tell one full component (1.57) from two spherical ones (1.51); at
    # xi^2 = 1 and 3,000 points it chose as the clean targets did on 5 of 6
    # seeds, and within 0.6% on the sixth
    Z, X, _ = make_gaussian_mixture(3000, MEANS, covariance=1.0, noise_variance=1.0, random_state=0)
    Z_test, X_test, _ = make_gaussian_mixture(
        20000, MEANS, covariance=1.0, noise_variance=1.0, random_state=1
    )
    grid = {"n_components": [1, 2, 3], "covariance_type": ["spherical", "full"]}
    folds = KFold(3, shuffle=True, random_state=0)
    denoiser = GaussianMixtureDenoiser(noise_variance=1.0, random_state=0)
    by_sure = GridSearchCV(denoiser, grid, cv=folds).fit(Z)
    by_clean = GridSearchCV(denoiser, grid, cv=folds).fit(Z, X)
    risks = [
        np.mean((search.best_estimator_.transform(Z_test) - X_test) ** 2)
        for search in (by_sure, by_clean)
    ]
    assert risks[0] <= 1.02 * risks[1]
    # and the search did choose: one component (the best linear map) loses
    assert by_sure.best_params_["n_components"] > 1


def test_read_only_input_raises_no_torch_warning():
    # pandas 3 frames and joblib memory maps hand out read-only arrays; torch
    # warns once per process on sharing one, so the check runs in a fresh one
    code = (
        "import numpy as np\n"
        "from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser\n"
        "X = np.random.default_rng(0).normal(size=(60, 3))\n"
        "X.setflags(write=False)\n"
        "y = np.arange(60) % 2\n"
        "SoftmaxAttentionClassifier(max_iter=2).fit(X, y).predict_proba(X)\n"
        "SoftmaxAttentionDenoiser(noise_variance=0.1, max_iter=2).fit(X).transform(X)\n"
    )
    subprocess.run(
        [sys.executable, "-W", "error:The given NumPy array is not writable", "-c", code],
        check=True,
    )
