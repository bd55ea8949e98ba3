"""The oracle BayesDenoiser and the plug-in GaussianMixtureDenoiser."""

import copy
import pickle

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.denoising._bayes import BayesDenoiser
from sk_softmix.denoising._gaussian_mixture import GaussianMixtureDenoiser, expand_covariances
from sk_softmix.theory._mixture import posterior_mean, psd_part
from sk_softmix.theory.affine_maps import best_affine_map

# The paper's Figure 2 task.
FIG2_MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])
FIG2_GAMMA2 = 1.0
FIG2_XI2 = 4.0


@pytest.fixture(scope="module")
def fig2_data():
    Z, X, _ = make_gaussian_mixture(
        1000,
        FIG2_MEANS,
        covariance=FIG2_GAMMA2,
        noise_variance=FIG2_XI2,
        random_state=0,
    )
    return Z, X


def _bayes():
    return BayesDenoiser(FIG2_MEANS, covariance=FIG2_GAMMA2, noise_variance=FIG2_XI2)


def _gmm(**params):
    return GaussianMixtureDenoiser(noise_variance=FIG2_XI2, random_state=0, **params)


@pytest.fixture(scope="module")
def fitted(fig2_data):
    """One fitted denoiser of each kind; tests take deep copies (EM is slow
    enough on 2 cores that refitting in every test would dominate)."""
    Z, _ = fig2_data
    denoisers = {"bayes": _bayes().fit(Z), "gmm": _gmm().fit(Z)}
    return lambda kind: copy.deepcopy(denoisers[kind])


# --------------------------------------------------------------------------
# BayesDenoiser


def test_bayes_denoiser_is_the_posterior_mean(fig2_data):
    Z, _ = fig2_data
    weights = [0.3, 0.7]
    covariance = np.array([[1.0, 0.3], [0.3, 2.0]])
    denoiser = BayesDenoiser(FIG2_MEANS, weights, covariance, noise_variance=0.5)
    denoiser.fit(Z)
    assert denoiser.n_features_in_ == 2
    np.testing.assert_array_equal(denoiser.covariances_, [covariance, covariance])
    np.testing.assert_array_equal(denoiser.weights_, weights)
    assert denoiser.noise_variance_ == 0.5
    expected = posterior_mean(
        Z,
        FIG2_MEANS,
        weights,
        denoiser.covariances_ + 0.5 * np.eye(2),
        [covariance] * 2,
    )
    np.testing.assert_array_equal(denoiser.transform(Z), expected)
    np.testing.assert_array_equal(denoiser.predict(Z), expected)
    np.testing.assert_array_equal(denoiser.fit_transform(Z), expected)
    # Lists are accepted for every argument.
    from_lists = BayesDenoiser(FIG2_MEANS.tolist(), weights, covariance.tolist(), 0.5)
    np.testing.assert_array_equal(from_lists.fit(Z.tolist()).transform(Z), expected)


def test_bayes_denoiser_score_is_negative_mse(fig2_data):
    Z, X = fig2_data
    denoiser = _bayes().fit(Z)
    mse = np.mean((denoiser.transform(Z) - X) ** 2)
    assert denoiser.score(Z, X) == pytest.approx(-mse, rel=1e-12)


@pytest.mark.parametrize("kind", ["bayes", "gmm"])
def test_float32_in_float32_out(kind, fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted(kind)
    out32 = denoiser.transform(Z.astype(np.float32))
    assert out32.dtype == np.float32
    # The algebra runs in float64; only the input and output roundings differ.
    np.testing.assert_allclose(out32, denoiser.transform(Z), rtol=1e-5, atol=1e-5)
    assert denoiser.transform(Z.astype(int)).dtype == np.float64


def test_bayes_denoiser_feature_names():
    denoiser = _bayes().fit(np.zeros((3, 2)))
    np.testing.assert_array_equal(denoiser.get_feature_names_out(), ["x0", "x1"])


# --------------------------------------------------------------------------
# GaussianMixtureDenoiser


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_gmm_denoiser_attributes(covariance_type, fig2_data):
    Z, _ = fig2_data
    # the mixture itself, whatever the fallback's held-out comparison says
    denoiser = _gmm(covariance_type=covariance_type, fallback=False).fit(Z)
    K, p = 2, 2
    assert denoiser.means_.shape == (K, p)
    assert denoiser.weights_.sum() == pytest.approx(1.0)
    assert denoiser.noisy_covariances_.shape == (K, p, p)
    assert denoiser.signal_covariances_.shape == (K, p, p)
    assert denoiser.n_iter_ == denoiser.gmm_.n_iter_
    # The expanded covariances reproduce the fitted model's log-likelihood.
    gmm = denoiser.gmm_
    density = sum(
        w * multivariate_normal(m, S).pdf(Z)
        for w, m, S in zip(
            denoiser.weights_, denoiser.means_, denoiser.noisy_covariances_, strict=True
        )
    )
    # gmm_ is fitted on Z / scale_: its density there, mapped back to Z's units
    log_density = gmm.score_samples(Z / denoiser.scale_) - p * np.log(denoiser.scale_)
    np.testing.assert_allclose(np.log(density), log_density, rtol=1e-10)
    np.testing.assert_allclose(
        denoiser.signal_covariances_,
        psd_part(denoiser.noisy_covariances_ - FIG2_XI2 * np.eye(p)),
    )
    expected = posterior_mean(
        Z,
        denoiser.means_,
        denoiser.weights_,
        denoiser.noisy_covariances_,
        denoiser.signal_covariances_,
    )
    np.testing.assert_array_equal(denoiser.transform(Z), expected)


def test_expand_covariances_forms():
    K, p = 3, 2
    tied = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_array_equal(expand_covariances(tied, "tied", K, p), [tied] * 3)
    diag = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(
        expand_covariances(diag, "diag", K, p), [np.diag(row) for row in diag]
    )
    spherical = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(
        expand_covariances(spherical, "spherical", K, p),
        [v * np.eye(p) for v in spherical],
    )
    with pytest.raises(ValueError, match="covariance_type must be"):
        expand_covariances(spherical, "other", K, p)


def test_gmm_denoiser_clips_covariance_below_noise():
    # Noise-free data have covariance below xi^2: Gamma_k clips to zero and
    # the denoiser maps each point onto its (soft) component mean.
    rng = np.random.default_rng(0)
    Z = np.vstack([rng.normal(-5, 0.5, (200, 1)), rng.normal(5, 0.5, (200, 1))])
    denoiser = GaussianMixtureDenoiser(noise_variance=1.0, random_state=0).fit(Z)
    np.testing.assert_array_equal(denoiser.signal_covariances_, 0.0)
    np.testing.assert_allclose(
        np.sort(denoiser.transform([[-5.0], [5.0]]), axis=0),
        np.sort(denoiser.means_, axis=0),
        atol=1e-8,
    )


def test_gmm_denoiser_close_to_bayes_on_figure_2_task():
    """Plug-in within 1% of the oracle on the paper's Figure 2 task."""
    Z_train, _, _ = make_gaussian_mixture(
        20_000,
        FIG2_MEANS,
        covariance=FIG2_GAMMA2,
        noise_variance=FIG2_XI2,
        random_state=1,
    )
    Z_test, X_test, _ = make_gaussian_mixture(
        20_000,
        FIG2_MEANS,
        covariance=FIG2_GAMMA2,
        noise_variance=FIG2_XI2,
        random_state=2,
    )
    # tol=1e-6: with sklearn's default 1e-3 EM stops after ~5 iterations on
    # this heavily overlapping mixture, leaving a 0.3-0.8% excess risk.
    plug_in = _gmm(tol=1e-6, max_iter=500).fit(Z_train)
    oracle = _bayes().fit(Z_train)
    # Paired comparison on the same 20,000 test points: the plug-in's excess
    # risk comes from estimating ~11 parameters from 20,000 points (about
    # 0.1% over ten seeds), far below the 1% bound; test-set noise largely
    # cancels in the ratio.
    ratio = plug_in.score(Z_test, X_test) / oracle.score(Z_test, X_test)
    assert 1.0 - 1e-3 < ratio < 1.01


# --------------------------------------------------------------------------
# Bad input: message, and a previously fitted estimator is left unchanged


def _assert_unchanged(denoiser, Z, reference):
    np.testing.assert_array_equal(denoiser.transform(Z), reference)


@pytest.mark.parametrize("kind", ["bayes", "gmm"])
@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([[np.nan, 0.0], [1.0, 2.0], [3.0, 4.0]]), "Input X contains NaN"),
        (np.array([[np.inf, 0.0], [1.0, 2.0], [3.0, 4.0]]), "Input X contains inf"),
        (np.zeros(5), "Expected 2D array, got 1D array"),
        (np.zeros((2, 2, 2)), "Found array with dim 3"),
    ],
)
def test_bad_X(kind, bad, message, fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted(kind)
    reference = denoiser.transform(Z)
    with pytest.raises(ValueError, match=message):
        denoiser.fit(bad)
    _assert_unchanged(denoiser, Z, reference)
    with pytest.raises(ValueError, match=message):
        denoiser.transform(bad)
    with pytest.raises(ValueError, match=message):
        denoiser.score(bad, bad)
    _assert_unchanged(denoiser, Z, reference)


@pytest.mark.parametrize("kind", ["bayes", "gmm"])
def test_feature_count_mismatch_at_transform(kind, fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted(kind)
    reference = denoiser.transform(Z)
    message = "X has 3 features, but .* is expecting 2 features"
    with pytest.raises(ValueError, match=message):
        denoiser.transform(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=message):
        denoiser.score(np.zeros((4, 3)), np.zeros((4, 3)))
    _assert_unchanged(denoiser, Z, reference)


def test_bayes_denoiser_fit_on_wrong_dimension(fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted("bayes")
    reference = denoiser.transform(Z)
    with pytest.raises(ValueError, match=r"X has 3 features, but the mixture lives in"):
        denoiser.fit(np.zeros((4, 3)))
    assert denoiser.n_features_in_ == 2
    _assert_unchanged(denoiser, Z, reference)


@pytest.mark.parametrize("kind", ["bayes", "gmm"])
def test_score_ignores_y_of_other_shape(kind, fitted, fig2_data):
    """A y not shaped like X is a later step's target: scored by SURE instead."""
    Z, X = fig2_data
    denoiser = fitted(kind)
    reference = denoiser.transform(Z)
    assert denoiser.score(Z, X[:, 0]) == denoiser.score(Z)
    assert denoiser.score(Z, X[:-1]) == denoiser.score(Z)
    assert denoiser.score(Z) != denoiser.score(Z, X)
    _assert_unchanged(denoiser, Z, reference)


@pytest.mark.parametrize("kind", ["bayes", "gmm"])
@pytest.mark.parametrize("value", [0.0, -1.0, "4"])
def test_invalid_noise_variance(kind, value, fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted(kind)
    reference = denoiser.transform(Z)
    denoiser.set_params(noise_variance=value)
    with pytest.raises(InvalidParameterError, match="'noise_variance' parameter"):
        denoiser.fit(Z)
    _assert_unchanged(denoiser, Z, reference)


def test_gmm_denoiser_requires_noise_variance(fitted, fig2_data):
    Z, _ = fig2_data
    message = r"GaussianMixtureDenoiser needs noise_variance \(xi\^2\)"
    with pytest.raises(ValueError, match=message):
        GaussianMixtureDenoiser().fit(Z)
    denoiser = fitted("gmm")
    reference = denoiser.transform(Z)
    denoiser.set_params(noise_variance=None)
    with pytest.raises(ValueError, match=message):
        denoiser.fit(Z)
    _assert_unchanged(denoiser, Z, reference)


def test_gmm_denoiser_too_few_samples(fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted("gmm")
    reference = denoiser.transform(Z)
    with pytest.raises(ValueError, match="n_components=2 needs at least .* n_samples=1"):
        denoiser.fit(Z[:1])
    _assert_unchanged(denoiser, Z, reference)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(weights=[0.9, 0.3]), "weights must sum to 1"),
        (dict(covariance=np.eye(3)), r"covariance must be .* got shape \(3, 3\)"),
        (dict(covariance="big"), "'covariance' parameter"),
        (dict(means=[[1.0, np.nan]]), "means must contain only finite"),
    ],
)
def test_bayes_denoiser_bad_mixture(params, message, fitted, fig2_data):
    Z, _ = fig2_data
    denoiser = fitted("bayes")
    reference = denoiser.transform(Z)
    denoiser.set_params(**params)
    with pytest.raises(ValueError, match=message):
        denoiser.fit(Z)
    _assert_unchanged(denoiser, Z, reference)


@pytest.mark.parametrize("make", [_bayes, _gmm])
def test_transform_before_fit(make):
    with pytest.raises(NotFittedError):
        make().transform(np.zeros((2, 2)))


# --------------------------------------------------------------------------
# Composition: pipeline, clone, pickle, cross-validation


def test_pipeline_clone_pickle(fitted, fig2_data):
    Z, X = fig2_data
    # No scaler in front: rescaling Z would change the noise variance.
    pipeline = Pipeline([("denoise", _gmm())]).fit(Z)
    alone = fitted("gmm")
    np.testing.assert_array_equal(pipeline.transform(Z), alone.transform(Z))
    np.testing.assert_array_equal(pipeline.predict(Z), alone.transform(Z))
    assert pipeline.score(Z, X) == alone.score(Z, X)

    for denoiser in (alone, fitted("bayes")):
        cloned = clone(denoiser)
        assert cloned.get_params().keys() == denoiser.get_params().keys()
        assert not hasattr(cloned, "n_features_in_")
        np.testing.assert_array_equal(cloned.fit(Z).transform(Z), denoiser.transform(Z))
        restored = pickle.loads(pickle.dumps(denoiser))
        np.testing.assert_array_equal(restored.transform(Z), denoiser.transform(Z))


def test_cross_val_score_with_mse_scoring(fig2_data):
    Z, X = fig2_data
    scores = cross_val_score(_bayes(), Z, X, scoring="neg_mean_squared_error", cv=3)
    own = cross_val_score(_bayes(), Z, X, cv=3)  # the estimator's score method
    np.testing.assert_allclose(scores, own, rtol=1e-12)
    assert np.all(scores < 0)


@pytest.mark.parametrize("n_features", [1, 4])
def test_bayes_denoiser_without_means_is_the_wiener_filter(n_features):
    # one component at the origin: E[X | Z] = gamma^2 / (gamma^2 + xi^2) z exactly
    Z = np.random.default_rng(0).normal(size=(50, n_features))
    denoiser = BayesDenoiser(covariance=3.0, noise_variance=1.0).fit(Z)
    np.testing.assert_allclose(denoiser.transform(Z), 0.75 * Z, rtol=1e-12)
    assert denoiser.means_.shape == (1, n_features)
    # a full covariance: Gamma (Gamma + xi^2 I)^{-1} z
    Gamma = np.diag(np.arange(1.0, n_features + 1))
    full = BayesDenoiser(covariance=Gamma, noise_variance=1.0).fit(Z)
    np.testing.assert_allclose(
        full.transform(Z), Z @ (Gamma @ np.linalg.inv(Gamma + np.eye(n_features))).T, rtol=1e-12
    )


def test_gmm_denoiser_tolerance_is_per_entry_and_running_out_warns(fig2_data):
    Z = fig2_data[0]
    wide = np.hstack([Z, Z[::-1], Z[::-1] * 0.5])  # 6 features
    for data in (Z, wide):
        fitted = GaussianMixtureDenoiser(noise_variance=4.0, random_state=0).fit(data)
        assert fitted.gmm_.tol == pytest.approx(1e-5 * data.shape[1])
    with pytest.warns(ConvergenceWarning):
        GaussianMixtureDenoiser(noise_variance=4.0, max_iter=1, random_state=0).fit(Z)


# --------------------------------------------------------------------------
# GaussianMixtureDenoiser's fallback on the Wiener map


def _wiener(Z, xi2):
    A, c = best_affine_map(Z, noise_variance=xi2)
    return lambda queries: queries @ A.T + c


@pytest.mark.parametrize("seed", range(3))
def test_gmm_denoiser_keeps_a_mixture_that_helps(seed):
    # Figure 2's task: Bayes is 4% below the Wiener map, the plug-in from
    # 2,000 points 2-3%
    Z, X, _ = make_gaussian_mixture(
        2000, FIG2_MEANS, covariance=FIG2_GAMMA2, noise_variance=FIG2_XI2, random_state=seed
    )
    denoiser = _gmm().fit(Z)
    assert denoiser.n_components_ == 2 and denoiser.means_.shape == (2, 2)


@pytest.mark.parametrize("supervised", [False, True])
def test_gmm_denoiser_falls_back_on_the_wiener_map_where_the_mixture_overfits(supervised):
    # one Gaussian in 20 dimensions fitted with 10 full covariances from 400
    # points: the plug-in overfits, and the Wiener map, the best affine map,
    # is the Bayes denoiser; held out by SURE, or by clean targets when given
    Z, X, _ = make_gaussian_mixture(
        400, np.zeros((1, 20)), covariance=1.0, noise_variance=1.0, random_state=0
    )
    denoiser = GaussianMixtureDenoiser(n_components=10, noise_variance=1.0, random_state=0)
    denoiser.fit(Z, X if supervised else None)
    assert denoiser.n_components_ == 1 and denoiser.means_.shape == (1, 20)
    Z_test = np.random.default_rng(1).normal(size=(50, 20)) * np.sqrt(2)
    # GaussianMixture adds reg_covar = 1e-6 (of the mean square) to S
    np.testing.assert_allclose(
        denoiser.transform(Z_test), _wiener(Z, 1.0)(Z_test), rtol=0, atol=1e-5
    )
    # without the fallback, the overfitted mixture denoises worse than it
    Z_test, X_test, _ = make_gaussian_mixture(
        2000, np.zeros((1, 20)), covariance=1.0, noise_variance=1.0, random_state=2
    )
    forced = clone(denoiser).set_params(fallback=False).fit(Z)
    assert forced.n_components_ == 10
    assert -forced.score(Z_test, X_test) > -denoiser.score(Z_test, X_test)


def test_gmm_denoiser_fallback_needs_a_point_per_fold():
    # 4 points for 5 folds: the mixture cannot be checked, so one Gaussian it is
    Z = np.array([[0.0, 1.0], [1.0, 0.0], [5.0, 5.0], [6.0, 5.0]])
    with pytest.warns(UserWarning, match="too few to check"):
        denoiser = GaussianMixtureDenoiser(noise_variance=0.1, random_state=0).fit(Z)
    assert denoiser.n_components_ == 1
