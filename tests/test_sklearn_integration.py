"""Pipelines, clone, grid search and cross-validation with clean targets y."""

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
