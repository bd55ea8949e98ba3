"""SoftmaxAttentionDenoiser and LinearAttentionDenoiser against closed forms."""

import pickle

import numpy as np
import pytest
import torch

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.theory.risk import best_linear_risk

# The paper's Figure 2 task: p=2, m1=(3,0), m2=(0,3), gamma=1, xi=2, equal weights.
MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])
GAMMA2, XI2 = 1.0, 4.0


@pytest.fixture(scope="module")
def figure_2():
    Z, X, _ = make_gaussian_mixture(
        20_000, MEANS, covariance=GAMMA2, noise_variance=XI2, random_state=0
    )
    Z_test, X_test, _ = make_gaussian_mixture(
        20_000, MEANS, covariance=GAMMA2, noise_variance=XI2, random_state=1
    )
    oracle = BayesDenoiser(MEANS, covariance=GAMMA2, noise_variance=XI2).fit(Z)
    bayes_errors = squared_errors(oracle.transform(Z_test), X_test)
    return Z, X, Z_test, X_test, bayes_errors


def squared_errors(denoised, clean):
    """Per-point mean squared error, so that two methods can be compared pairwise."""
    return np.mean((denoised - clean) ** 2, axis=1)


def paired_gap(errors, reference):
    """Relative excess risk over the reference and the standard error of the excess."""
    difference = errors - reference
    return difference.mean() / reference.mean(), difference.std() / np.sqrt(len(difference))


@pytest.mark.slow
def test_figure_2_two_heads_reach_bayes_within_two_percent(figure_2):
    Z, X, Z_test, X_test, bayes_errors = figure_2
    denoiser = SoftmaxAttentionDenoiser(head="bilinear", random_state=0).fit(Z, X)
    gap, _ = paired_gap(squared_errors(denoiser.transform(Z_test), X_test), bayes_errors)
    # measured 0.7% with default settings; 2% is the bound
    assert gap < 0.02
    # a trained start was kept (two are trained: the linear one and the construction)
    assert denoiser.init_ in ("linear", "bayes") and 0 < len(denoiser.history_) <= 200


def test_figure_2_gaussian_mixture_plug_in_within_one_percent(figure_2):
    Z, _, Z_test, X_test, bayes_errors = figure_2
    denoiser = GaussianMixtureDenoiser(noise_variance=XI2, random_state=0).fit(Z)
    gap, _ = paired_gap(squared_errors(denoiser.transform(Z_test), X_test), bayes_errors)
    assert gap < 0.01


def test_figure_2_linear_attention_is_stuck_at_the_best_linear_risk(figure_2):
    Z, X, Z_test, X_test, bayes_errors = figure_2
    denoiser = LinearAttentionDenoiser(random_state=0).fit(Z, X)
    errors = squared_errors(denoiser.transform(Z_test), X_test)
    best_linear = best_linear_risk(MEANS, covariance=GAMMA2, noise_variance=XI2)
    # 20,000 test points: the MSE's standard error is about 0.5% of its value
    assert abs(errors.mean() / best_linear - 1) < 0.02
    # best linear is 1.55x Bayes on this task: ~50 standard errors of excess
    gap, standard_error = paired_gap(errors, bayes_errors)
    assert gap > 0.4 and gap * bayes_errors.mean() > 10 * standard_error


def test_figure_2_more_linear_layers_do_not_help(figure_2):
    Z, X, Z_test, X_test, bayes_errors = figure_2
    deep = LinearAttentionDenoiser(n_layers=3, random_state=0).fit(Z, X)
    errors = squared_errors(deep.transform(Z_test), X_test)
    best_linear = best_linear_risk(MEANS, covariance=GAMMA2, noise_variance=XI2)
    assert errors.mean() > 0.98 * best_linear


@pytest.mark.slow
def test_bayes_construction_approaches_bayes_as_the_prompt_grows(figure_2):
    """Finite prompts are not the population: the gap closes slowly with L.

    The population construction is exact (test_population.py). On a finite
    prompt the tokens' noise enters through exponential weights, and a query
    far out in the tails puts almost all its weight on a few tokens, so the
    gap varies a lot from one prompt draw to the next: with the true S it
    measured 3.6-5.7% (mean 4.5%) over five prompts of 20,000 tokens, and
    2.3% and 11% for two prompts of 100,000. We therefore average four
    independent prompts per length.
    """
    _, _, Z_test, X_test, bayes_errors = figure_2
    # 10,000 test points: the paired standard error of each gap is ~0.3%
    Z_test, X_test, bayes_errors = (
        Z_test[:10_000],
        X_test[:10_000],
        bayes_errors[:10_000],
    )
    mean_gap = {}
    for prompt_length in (2_000, 20_000):
        gaps = []
        for seed in range(4):
            prompt, _, _ = make_gaussian_mixture(
                prompt_length,
                MEANS,
                covariance=GAMMA2,
                noise_variance=XI2,
                random_state=100 + seed,
            )
            denoiser = SoftmaxAttentionDenoiser(
                init="bayes", noise_variance=XI2, max_iter=0, random_state=0
            ).fit(prompt)
            gap, _ = paired_gap(squared_errors(denoiser.transform(Z_test), X_test), bayes_errors)
            gaps.append(gap)
        mean_gap[prompt_length] = np.mean(gaps)
    assert mean_gap[20_000] < 0.07
    assert mean_gap[2_000] > 2 * mean_gap[20_000]


@pytest.mark.slow
@pytest.mark.parametrize("gamma2, xi2, one_head_exact", [(0.01, 4.0, False), (2.0, 2.0, True)])
def test_theorem_4_1_one_head_needs_equal_signal_and_noise_variances(gamma2, xi2, one_head_exact):
    """Without a skip path, one head is Bayes iff gamma^2 = xi^2; two heads always."""
    Z, X, _ = make_gaussian_mixture(
        5_000, MEANS, covariance=gamma2, noise_variance=xi2, random_state=2
    )
    Z_test, X_test, _ = make_gaussian_mixture(
        20_000, MEANS, covariance=gamma2, noise_variance=xi2, random_state=3
    )
    bayes_errors = squared_errors(
        BayesDenoiser(MEANS, covariance=gamma2, noise_variance=xi2).fit(Z).transform(Z_test),
        X_test,
    )
    errors = {
        n_heads: squared_errors(
            SoftmaxAttentionDenoiser(n_heads=n_heads, residual=False, random_state=0)
            .fit(Z, X)
            .transform(Z_test),
            X_test,
        )
        for n_heads in (1, 2)
    }
    two_head_gap, _ = paired_gap(errors[2], bayes_errors)
    one_over_two, standard_error = paired_gap(errors[1], errors[2])
    excess = one_over_two * errors[2].mean()
    # Measured with the default held-out tenth (4,500 training points): two
    # heads 2.4% above Bayes when equal (1.7% trained on all 5,000), the rest
    # being the finite prompt; one head 2.2% above two heads (15 standard
    # errors) when unequal, 0.2-0.4% when equal.
    assert two_head_gap < 0.03
    if one_head_exact:
        assert one_over_two < 0.01
    else:
        assert one_over_two > 0.01 and excess > 5 * standard_error


def test_fit_transform_leaves_each_point_out_of_its_own_prompt():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(30, 2)) * 2
    denoiser = SoftmaxAttentionDenoiser(
        init="bayes", noise_variance=1.0, n_components=1, max_iter=0, random_state=0
    )
    left_out = denoiser.fit_transform(Z)
    with_self = denoiser.transform(Z)
    # The self-term, written out: with weights a_i over the whole prompt, the
    # left-out average is (sum_i a_i z_i - a_self z_self) / (1 - a_self).
    U, V, skip = denoiser.U_[0], denoiser.V_[0], denoiser.skip_
    scores = Z @ U @ Z.T  # (query, token): z_i^T U z, U symmetric here
    a = np.exp(scores - scores.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    full_mean = a @ Z
    own = np.diag(a)[:, None]
    expected_left_out = Z @ skip.T + ((full_mean - own * Z) / (1 - own)) @ V.T
    expected_with_self = Z @ skip.T + full_mean @ V.T
    np.testing.assert_allclose(with_self, expected_with_self, rtol=1e-10)
    np.testing.assert_allclose(left_out, expected_left_out, rtol=1e-10)
    assert np.min(np.abs(left_out - with_self)) > 0


@pytest.mark.parametrize("residual", [True, False])
def test_transform_is_the_documented_formula(residual):
    rng = np.random.default_rng(1)
    Z, X = rng.normal(size=(60, 3)), rng.normal(size=(60, 3))
    denoiser = SoftmaxAttentionDenoiser(
        n_heads=3, residual=residual, init="random", max_iter=5, random_state=0
    ).fit(Z, X)
    queries = rng.normal(size=(7, 3))
    expected = np.zeros_like(queries)
    prompt = Z[denoiser.prompt_indices_]  # the rows not held out for validation
    np.testing.assert_array_equal(denoiser.prompt_, prompt)
    for U, V in zip(denoiser.U_, denoiser.V_, strict=True):
        scores = queries @ U.T @ prompt.T  # (n, L): z_i^T U z
        a = np.exp(scores - scores.max(axis=1, keepdims=True))
        expected += (a / a.sum(axis=1, keepdims=True)) @ prompt @ V.T
    if residual:
        expected += queries @ denoiser.skip_.T
    np.testing.assert_allclose(denoiser.transform(queries), expected, rtol=1e-10)


@pytest.mark.parametrize("Estimator", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
def test_results_do_not_depend_on_the_chunk_size(Estimator):
    rng = np.random.default_rng(2)
    Z, X = rng.normal(size=(80, 2)), rng.normal(size=(80, 2))
    fitted = Estimator(init="random", max_iter=3, random_state=0).fit(Z, X)
    reference = fitted.transform(Z)
    for batch_size in (1, 7, 1000):
        fitted.set_params(transform_batch_size=batch_size)
        np.testing.assert_allclose(fitted.transform(Z), reference, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("Estimator", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
def test_float32_in_float32_out_and_agrees_with_float64(Estimator):
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(100, 2)) * 3
    fitted = Estimator(noise_variance=1.0, max_iter=0, random_state=0).fit(Z)
    out32 = fitted.transform(Z.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, fitted.transform(Z), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("Estimator", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
def test_same_seed_same_model(Estimator):
    rng = np.random.default_rng(4)
    Z, X = rng.normal(size=(100, 2)), rng.normal(size=(100, 2))
    first = Estimator(init="random", max_iter=10, random_state=7).fit(Z, X)
    second = Estimator(init="random", max_iter=10, random_state=7).fit(Z, X)
    np.testing.assert_array_equal(first.U_, second.U_)
    np.testing.assert_array_equal(first.transform(Z), second.transform(Z))


@pytest.mark.parametrize("Estimator", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
def test_fitted_state_is_numpy_and_pickles(Estimator):
    rng = np.random.default_rng(5)
    Z, X = rng.normal(size=(50, 2)), rng.normal(size=(50, 2))
    fitted = Estimator(max_iter=3, random_state=0).fit(Z, X)
    for name, value in vars(fitted).items():
        assert not isinstance(value, torch.Tensor | torch.nn.Module), name
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.transform(Z), fitted.transform(Z))


def test_noise_variance_is_estimated_from_clean_targets():
    Z, X, _ = make_gaussian_mixture(
        5_000, MEANS, covariance=GAMMA2, noise_variance=XI2, random_state=5
    )
    fitted = SoftmaxAttentionDenoiser(max_iter=0, random_state=0).fit(Z, X)
    # mean of 10,000 squared N(0, 4) draws: standard error 4 * sqrt(2 / 10,000)
    assert abs(fitted.noise_variance_ - XI2) < 5 * XI2 * np.sqrt(2 / 10_000)
    given = SoftmaxAttentionDenoiser(noise_variance=3.0, max_iter=0).fit(Z, X)
    assert given.noise_variance_ == 3.0


# -- bad input: a clear error, and a fitted estimator left exactly as it was ------


def fitted_denoisers():
    rng = np.random.default_rng(7)
    Z, X = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    return Z, [
        SoftmaxAttentionDenoiser(max_iter=2, random_state=0).fit(Z, X),
        LinearAttentionDenoiser(max_iter=2, random_state=0).fit(Z, X),
    ]


BAD_FITS = {
    "nan": (
        lambda Z: np.where(np.arange(Z.size).reshape(Z.shape) == 3, np.nan, Z),
        None,
        "NaN",
    ),
    "inf": (
        lambda Z: np.where(np.arange(Z.size).reshape(Z.shape) == 3, np.inf, Z),
        None,
        "infinity",
    ),
    "1-D": (lambda Z: Z[:, 0], None, "Expected 2D array"),
    "3-D": (lambda Z: Z[None], None, "Found array with dim 3"),
    "one sample": (lambda Z: Z[:1], None, "minimum of 2 is required"),
    "y with NaN": (lambda Z: Z, lambda Z: Z * np.nan, "NaN"),
}


@pytest.mark.parametrize("case", sorted(BAD_FITS))
def test_bad_fit_input_raises_and_changes_nothing(case):
    Z, denoisers = fitted_denoisers()
    make_X, make_y, message = BAD_FITS[case]
    for denoiser in denoisers:
        before = denoiser.transform(Z)
        state = dict(vars(denoiser))
        with pytest.raises(ValueError, match=message):
            denoiser.fit(make_X(Z), None if make_y is None else make_y(Z))
        assert vars(denoiser).keys() == state.keys()
        np.testing.assert_array_equal(denoiser.transform(Z), before)


def test_bad_transform_and_parameter_input():
    Z, denoisers = fitted_denoisers()
    for denoiser in denoisers:
        before = denoiser.transform(Z)
        with pytest.raises(ValueError, match="expecting 2 features"):
            denoiser.transform(np.ones((3, 5)))
        with pytest.raises(ValueError, match="NaN"):
            denoiser.transform(np.full((3, 2), np.nan))
        # a y not shaped like X is not a clean target: scored by SURE instead
        assert denoiser.score(Z, Z[:, :1]) == denoiser.score(Z)
        for bad in (0.0, -1.0):
            with pytest.raises(ValueError, match="noise_variance"):
                denoiser.set_params(noise_variance=bad).fit(Z, Z)
        denoiser.set_params(noise_variance=None)
        with pytest.raises(ValueError, match="prompt_size=100 exceeds"):
            denoiser.set_params(prompt_size=100).fit(Z, Z)
        denoiser.set_params(prompt_size=None)
        np.testing.assert_array_equal(denoiser.transform(Z), before)


def test_fit_without_targets_or_noise_variance_says_what_it_needs():
    Z = np.random.default_rng(8).normal(size=(20, 2))
    for init in ("random", "bayes"):
        with pytest.raises(ValueError, match="needs either y.*or noise_variance"):
            SoftmaxAttentionDenoiser(init=init).fit(Z)


def test_unavailable_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    Z = np.random.default_rng(9).normal(size=(20, 2))
    with pytest.raises(ValueError, match="CUDA is not available"):
        SoftmaxAttentionDenoiser(device="cuda").fit(Z, Z)


def test_verbose_reports_training_progress(capsys):
    rng = np.random.default_rng(10)
    Z, X = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    one_run = {"init": "bayes", "solver": "adam", "early_stopping": False}
    SoftmaxAttentionDenoiser(max_iter=20, verbose=1, random_state=0, **one_run).fit(Z, X)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    # each line names the start it trains; the progress bar goes to stderr
    assert len(lines) == 11
    assert lines[-1].startswith("[SoftmaxAttentionDenoiser, start 'bayes'] iteration 20/20")
    assert "start 'bayes'" in captured.err and "/20" in captured.err
    # with the default model selection: the construction's validation against
    # the untrained linear start, and the choice with its rule
    SoftmaxAttentionDenoiser(head="bilinear", max_iter=20, verbose=1, random_state=0).fit(Z, X)
    lines = capsys.readouterr().out.splitlines()
    assert "against the untrained 'linear' start (validation)" in lines[-2]
    assert lines[-2].startswith("[SoftmaxAttentionDenoiser] start 'bayes'")
    assert lines[-1].startswith("[SoftmaxAttentionDenoiser] kept ")
    assert "validation loss" in lines[-1] and "untrained" in lines[-1]
    # verbose=0: nothing on either stream
    SoftmaxAttentionDenoiser(max_iter=20, random_state=0, **one_run).fit(Z, X)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("Estimator", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
@pytest.mark.parametrize("supervised", [True, False])
def test_history_is_in_the_data_units(Estimator, supervised):
    # every estimator is scale-equivariant: data 10x larger give a loss 100x
    # larger at every iteration, whatever scale training runs at internally
    Z, X, _ = make_gaussian_mixture(
        300, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    )
    settings = dict(max_iter=4, init="linear", early_stopping=False, random_state=0)
    small = Estimator(noise_variance=4.0, **settings).fit(Z, X if supervised else None)
    large = Estimator(noise_variance=400.0, **settings).fit(10 * Z, 10 * X if supervised else None)
    np.testing.assert_allclose(large.history_, 100 * small.history_, rtol=1e-4)
    # partial_fit reports its passes in the same units
    small.partial_fit(Z, X if supervised else None)
    large.partial_fit(10 * Z, 10 * X if supervised else None)
    np.testing.assert_allclose(large.history_, 100 * small.history_, rtol=1e-4)
