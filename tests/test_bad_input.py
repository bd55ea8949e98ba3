"""Bad input, estimator by estimator and method by method (issue 7).

Each test function is one kind of bad input, parametrised over every
estimator and every public method it has among ``fit``, ``partial_fit``,
``predict``, ``predict_proba``, ``decision_function``, ``transform`` and
``score``. A rejected input must raise the stated exception with a message
that names the problem, and leave an already fitted estimator giving exactly
the predictions it gave before. Inputs an estimator supports (one sample,
one feature, float16, integers, huge magnitudes) must work and give finite
floating-point output.

Cases where the package misbehaves today are strict expected failures,
listed in ``KNOWN_FAILURES`` with what happens now. Well-formed but awkward
data (constant features, extreme scales, a misspecified noise variance) is
the subject of ``tests/test_degenerate.py``; the end of this file holds the
confusing errors issue 13 found.
"""

import copy

import numpy as np
import pytest
import scipy.sparse
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)

N_SAMPLES = 60
MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])

_rng = np.random.RandomState(0)
LABELS = np.arange(N_SAMPLES) % 2
CLEAN = MEANS[LABELS] + _rng.normal(size=(N_SAMPLES, 2))
NOISY = CLEAN + 2.0 * _rng.normal(size=(N_SAMPLES, 2))
QUERIES = NOISY[:10]  # what "the predictions" are computed on

ESTIMATORS = {
    "softmax": lambda: SoftmaxAttentionDenoiser(
        noise_variance=4.0, max_iter=3, batch_size=32, device="cpu", random_state=0
    ),
    "linear": lambda: LinearAttentionDenoiser(
        noise_variance=4.0, max_iter=3, batch_size=32, device="cpu", random_state=0
    ),
    "gmm": lambda: GaussianMixtureDenoiser(noise_variance=4.0, max_iter=20, random_state=0),
    "bayes": lambda: BayesDenoiser(means=[[3, 0], [0, 3]], covariance=1.0, noise_variance=4.0),
    "classifier": lambda: SoftmaxAttentionClassifier(
        max_iter=3, batch_size=32, device="cpu", random_state=0
    ),
}
FITTING = ("fit", "partial_fit")
PREDICTING = ("transform", "predict", "predict_proba", "decision_function")
METHODS = {
    "softmax": ("fit", "partial_fit", "transform", "predict", "score"),
    "linear": ("fit", "partial_fit", "transform", "predict", "score"),
    "gmm": ("fit", "transform", "predict", "score"),
    "bayes": ("fit", "transform", "predict", "score"),
    "classifier": ("fit", "predict", "predict_proba", "decision_function", "score"),
}

# (test kind, case id) -> what the package does now
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


def cases(kind, estimators=tuple(ESTIMATORS), methods=None, variants=None):
    """``(estimator, method[, variant])`` params for one input kind.

    ``variants`` is a list of ``(id, value)``; each case's id is
    ``estimator-method[-variant]``, and cases listed in ``KNOWN_FAILURES``
    under ``(kind, id)`` are strict expected failures.
    """
    params = []
    for name in estimators:
        for method in METHODS[name]:
            if methods is not None and method not in methods:
                continue
            for variant_id, variant in variants or [(None, None)]:
                case_id = (
                    f"{name}-{method}" if variant_id is None else f"{name}-{method}-{variant_id}"
                )
                values = (name, method) if variant_id is None else (name, method, variant)
                params.append(_marked(kind, case_id, values))
    return params


def _marked(kind, case_id, values):
    reason = KNOWN_FAILURES.get((kind, case_id))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(*values, marks=marks, id=case_id)


@pytest.fixture(scope="module")
def fitted():
    """Every estimator fitted once on the normal data; tests deep-copy them."""
    estimators = {}
    for name, make in ESTIMATORS.items():
        y = LABELS if name == "classifier" else None
        estimators[name] = make().fit(NOISY, y)
    return estimators


def float_output(estimator, X):
    """Denoised points, or the classifier's scores, for ``X``."""
    if isinstance(estimator, SoftmaxAttentionClassifier):
        return estimator.decision_function(X)
    return estimator.transform(X)


def predictions(estimator):
    """The output compared before and after a failed call."""
    return float_output(estimator, QUERIES)


def n_rows(X):
    try:
        return X.shape[0]
    except AttributeError:
        return len(X)


DEFAULT = object()


def call(estimator, method, X, y=DEFAULT):
    """Call ``method`` with ``X`` and, where it takes one, a ``y`` matching ``X``."""
    if method in FITTING + ("score",):
        if y is DEFAULT:
            if isinstance(estimator, SoftmaxAttentionClassifier):
                y = np.arange(n_rows(X)) % 2
            else:
                # denoisers: unsupervised fit (noise_variance is set); score
                # against X itself, which is validated after X anyway
                y = X if method == "score" else None
        return getattr(estimator, method)(X, y)
    return getattr(estimator, method)(X)


def assert_rejected(fitted, name, method, X, exception, match, y=DEFAULT):
    """``method(X)`` raises, and the fitted estimator's predictions are unchanged."""
    estimator = copy.deepcopy(fitted[name])
    before = predictions(estimator)
    with pytest.raises(exception, match=match):
        call(estimator, method, X, y)
    assert np.array_equal(predictions(estimator), before)


def assert_works(estimator, method, X):
    """``method(X)`` succeeds, with finite floating-point output for ``X``."""
    result = call(estimator, method, X)
    if method in FITTING:
        assert result is estimator
        result = float_output(estimator, X)
    if method == "score":
        assert np.isfinite(result)
    elif method == "predict" and isinstance(estimator, SoftmaxAttentionClassifier):
        assert result.shape == (n_rows(X),)
        assert set(np.unique(result)) <= set(estimator.classes_)
    else:
        assert result.shape[0] == n_rows(X)
        assert result.dtype in (np.float32, np.float64)
        assert np.all(np.isfinite(result)), result


def fresh(name):
    return clone(ESTIMATORS[name]())


# -- non-finite values -----------------------------------------------------------


@pytest.mark.parametrize("name, method", cases("nan"))
def test_nan(fitted, name, method):
    X = NOISY.copy()
    X[3, 1] = np.nan
    assert_rejected(fitted, name, method, X, ValueError, "NaN")


@pytest.mark.parametrize(
    "name, method, value", cases("inf", variants=[("+inf", np.inf), ("-inf", -np.inf)])
)
def test_inf(fitted, name, method, value):
    X = NOISY.copy()
    X[3, 1] = value
    assert_rejected(fitted, name, method, X, ValueError, "infinity")


# -- sizes -----------------------------------------------------------------------


EMPTY = [
    ("no_samples", (np.empty((0, 2)), r"0 sample\(s\) \(shape=\(0, 2\)\)")),
    ("no_features", (np.empty((N_SAMPLES, 0)), r"0 feature\(s\) \(shape=\(60, 0\)\)")),
    ("empty_list", ([], r"Expected 2D array, got 1D array")),
]


@pytest.mark.parametrize("name, method, empty", cases("empty", variants=EMPTY))
def test_empty(fitted, name, method, empty):
    X, match = empty
    assert_rejected(fitted, name, method, X, ValueError, match)


@pytest.mark.parametrize("name, method", cases("single_sample"))
def test_single_sample(fitted, name, method):
    X = NOISY[:1]
    if method in FITTING and name != "bayes":
        # training leaves each query out of its prompt / a mixture needs points
        match = r"1 sample\(s\)|n_samples=1"
        assert_rejected(fitted, name, method, X, ValueError, match)
    else:
        estimator = copy.deepcopy(fitted[name])
        assert_works(estimator, method, X)


@pytest.mark.parametrize("name, method", cases("single_feature", methods=FITTING))
def test_single_feature_fit(name, method):
    X = NOISY[:, :1]
    estimator = fresh(name)
    if name == "bayes":  # the mixture lives in dimension 2
        with pytest.raises(ValueError, match="X has 1 features.*dimension 2"):
            call(estimator, method, X)
        return
    assert_works(estimator, method, X)


@pytest.mark.parametrize("name, method", cases("single_class", ["classifier"], ["fit"]))
def test_single_class(fitted, name, method):
    y = np.zeros(N_SAMPLES, dtype=int)
    assert_rejected(fitted, name, method, NOISY, ValueError, "at least 2 classes", y=y)


@pytest.mark.parametrize("name, method", cases("class_of_one", ["classifier"], ["fit"]))
def test_class_with_one_sample(fitted, name, method):
    # the kernel heads' classifier has nothing to leave out of a class of one
    # sample: it says so and is the weighted LDA of the points (bilinear
    # heads raise, test_classifier.py::test_a_class_of_one_sample)
    y = LABELS.copy()
    y[0] = 2  # class 2 has a single sample
    estimator = copy.deepcopy(fitted[name])
    with pytest.warns(UserWarning, match="single distinct point"):
        estimator.fit(NOISY, y)
    assert estimator.init_ == "linear" and len(estimator.classes_) == 3
    assert np.all(np.isfinite(estimator.predict_proba(NOISY)))


# -- shapes and types -------------------------------------------------------------


@pytest.mark.parametrize("name, method", cases("3d"))
def test_3d_array(fitted, name, method):
    X = NOISY.reshape(N_SAMPLES, 2, 1)
    assert_rejected(fitted, name, method, X, ValueError, "dim 3")


@pytest.mark.parametrize("name, method", cases("1d"))
def test_1d_array(fitted, name, method):
    assert_rejected(fitted, name, method, NOISY[:, 0], ValueError, "Expected 2D array")


@pytest.mark.parametrize("name, method", cases("ragged"))
def test_ragged_list(fitted, name, method):
    X = NOISY.tolist()
    X[2] = X[2][:1]
    assert_rejected(fitted, name, method, X, ValueError, "inhomogeneous|sequence")


@pytest.mark.parametrize("name, method", cases("strings"))
def test_strings(fitted, name, method):
    X = NOISY.astype(str).astype(object)
    X[4, 0] = "three"
    assert_rejected(fitted, name, method, X, ValueError, "could not convert string to float")


@pytest.mark.parametrize(
    "name, method", cases("n_features", methods=("partial_fit", "score") + PREDICTING)
)
def test_mismatched_n_features(fitted, name, method):
    X = np.hstack([NOISY, NOISY[:, :1]])
    match = "X has 3 features, but .* is expecting 2 features"
    assert_rejected(fitted, name, method, X, ValueError, match)


@pytest.mark.parametrize("name, method", cases("sparse"))
def test_sparse(fitted, name, method):
    X = scipy.sparse.csr_matrix(NOISY)
    assert_rejected(fitted, name, method, X, TypeError, "[Ss]parse")


# -- targets ----------------------------------------------------------------------

# denoisers' clean targets are shaped like X, and any other y is a later
# step's target that they ignore (below); a y shaped like X with NaN is bad
_TARGET_CASES = [
    c
    for c in cases("bad_y", variants=[(w, w) for w in ("short", "columns", "ndim", "nan")])
    if c.values[1] in FITTING + ("score",)
    and (c.values[0] == "classifier" or c.values[2] == "nan")
    and not (c.values[0] == "bayes" and c.values[1] == "fit")
]


@pytest.mark.parametrize("name, method, wrong", _TARGET_CASES)
def test_y_wrong_length_or_shape(fitted, name, method, wrong):
    if name == "classifier":
        nan_labels = LABELS.astype(float)
        nan_labels[5] = np.nan
        y = {
            "short": LABELS[:-1],
            "columns": np.column_stack([LABELS, LABELS]),
            "ndim": LABELS[:, None, None],
            "nan": nan_labels,
        }[wrong]
        match = {
            "short": "inconsistent numbers of samples",
            "columns": "1d array|can't handle a mix of",
            "ndim": "1d array|dim 3|can't handle a mix of",
            "nan": "NaN",
        }[wrong]
    else:
        y = CLEAN.copy()
        y[5, 0] = np.nan
        match = "Input y contains NaN"
    assert_rejected(fitted, name, method, NOISY, ValueError, match, y=y)


@pytest.mark.parametrize(
    "name, method, wrong",
    [
        c
        for c in cases("other_y", variants=[(w, w) for w in ("short", "columns", "ndim", "labels")])
        if c.values[0] != "classifier" and c.values[1] in FITTING + ("score",)
    ],
)
def test_y_not_shaped_like_x_is_ignored(fitted, name, method, wrong):
    """A denoiser's y of another shape is a later step's target: ignored."""
    y = {
        "short": CLEAN[:-1],
        "columns": CLEAN[:, :1],
        "ndim": CLEAN[:, 0],
        "labels": LABELS,
    }[wrong]
    with_y, without_y = copy.deepcopy(fitted[name]), copy.deepcopy(fitted[name])
    if method == "score":
        assert with_y.score(NOISY, y) == without_y.score(NOISY)
        return
    call(with_y, method, NOISY, y=y)
    call(without_y, method, NOISY)
    assert np.array_equal(predictions(with_y), predictions(without_y))


# -- dtypes and magnitudes --------------------------------------------------------


@pytest.mark.parametrize(
    "name, method, dtype",
    cases("dtype", variants=[("float16", np.float16), ("int64", np.int64)]),
)
def test_float16_and_integer_accepted(fitted, name, method, dtype):
    X = np.round(NOISY).astype(dtype)
    estimator = fresh(name) if method in FITTING else copy.deepcopy(fitted[name])
    assert_works(estimator, method, X)


HUGE_DTYPES = [("float64", np.float64), ("float32", np.float32)]


@pytest.mark.parametrize(
    "name, method, dtype", cases("huge_predict", methods=PREDICTING, variants=HUGE_DTYPES)
)
def test_huge_magnitudes_on_normal_fit(fitted, name, method, dtype):
    estimator = copy.deepcopy(fitted[name])
    assert_works(estimator, method, (1e20 * NOISY).astype(dtype))


@pytest.mark.parametrize(
    "name, method, dtype", cases("huge_fit", methods=FITTING, variants=HUGE_DTYPES)
)
def test_huge_magnitudes_fit(name, method, dtype):
    assert_works(fresh(name), method, (1e20 * NOISY).astype(dtype))


# -- hyperparameters --------------------------------------------------------------

INVALID_PARAMETERS = {
    "attention": [
        ("n_heads", 0),
        ("n_heads", 1.5),
        ("n_heads", True),  # a bool is an int to Python: not a count
        ("max_iter", True),
        ("batch_size", False),
        ("residual", "yes"),
        ("noise_variance", -1.0),
        ("noise_variance", 0.0),
        ("noise_variance", "4"),
        ("init", "nope"),
        ("prompt_size", 0),
        ("prompt_size", 1),
        ("max_iter", -1),
        ("learning_rate", 0),
        ("learning_rate", -0.1),
        ("batch_size", 0),
        ("tol", -1e-3),
        ("tol", "small"),
        ("n_iter_no_change", 0),
        ("device", 3),
        ("random_state", "seed"),
        ("verbose", -1),
        ("solver", "gd"),
        ("early_stopping", "yes"),
        ("validation_fraction", 0.0),
        ("validation_fraction", 1.0),
    ],
    "softmax": [("n_components", 0)],
    "linear": [("n_layers", 0)],
    "gmm": [
        ("n_components", 0),
        ("covariance_type", "nope"),
        ("noise_variance", -1.0),
        ("noise_variance", 0.0),
        ("tol", -1.0),
        ("reg_covar", -1.0),
        ("max_iter", -1),
        ("n_init", 0),
        ("init_params", "nope"),
        ("random_state", "seed"),
    ],
    "bayes": [
        ("means", "nope"),
        ("weights", "nope"),
        ("covariance", -1.0),
        ("covariance", "nope"),
        ("noise_variance", -1.0),
        ("noise_variance", 0.0),
        ("noise_variance", None),
    ],
    "classifier": [
        ("n_heads", 0),
        ("init", "nope"),
        ("prompt_size", 0),
        ("prompt_size", 1),
        ("max_iter", -1),
        ("learning_rate", 0),
        ("batch_size", 0),
        ("solver", "nope"),
        ("device", 3),
        ("random_state", "seed"),
        ("verbose", -1),
        ("alpha", -1.0),
        ("tol", -1e-3),
        ("n_iter_no_change", 0),
        ("residual", "yes"),
        ("early_stopping", "yes"),
        ("validation_fraction", 0.0),
        ("validation_fraction", 1.5),
    ],
}
INVALID_PARAMETERS["softmax"] += INVALID_PARAMETERS["attention"]
INVALID_PARAMETERS["linear"] += INVALID_PARAMETERS["attention"]


def _parameter_cases():
    params = []
    for name in ESTIMATORS:
        for method in METHODS[name]:
            if method not in FITTING:
                continue
            for parameter, value in INVALID_PARAMETERS[name]:
                case_id = f"{name}-{method}-{parameter}={value!r}"
                params.append(_marked("parameter", case_id, (name, method, parameter, value)))
    return params


@pytest.mark.parametrize("name, method, parameter, value", _parameter_cases())
def test_invalid_hyperparameter(fitted, name, method, parameter, value):
    estimator = copy.deepcopy(fitted[name])
    before = predictions(estimator)
    original = estimator.get_params()[parameter]
    estimator.set_params(**{parameter: value})
    match = f"The '{parameter}' parameter of {type(estimator).__name__} must be"
    with pytest.raises(InvalidParameterError, match=match):
        call(estimator, method, NOISY)
    estimator.set_params(**{parameter: original})
    assert np.array_equal(predictions(estimator), before)


# semantic checks that parameter constraints cannot express: a ValueError
# naming the parameter and the value
SEMANTIC_INVALID = [
    ("softmax", "device", "nope", "device='nope'"),
    ("softmax", "prompt_size", 1000, "prompt_size=1000 exceeds the 60 samples"),
    ("softmax", "n_components", 100, "100-component mixture"),
    ("linear", "device", "nope", "device='nope'"),
    ("linear", "prompt_size", 1000, "prompt_size=1000 exceeds the 60 samples"),
    ("gmm", "n_components", 100, "n_components=100"),
    ("gmm", "noise_variance", None, "noise_variance=None"),
    ("bayes", "weights", [0.5, 0.6], "weights must sum to 1"),
    ("bayes", "weights", [0.5, 0.25, 0.25], r"weights must have shape"),
    ("bayes", "means", [3.0, 0.0], "means must be a 2-D array"),
    ("bayes", "covariance", [[1.0, 0.0], [0.0, -1.0]], "covariance"),
    ("classifier", "device", "nope", "device='nope'"),
    ("classifier", "prompt_size", 1000, "prompt_size=1000 exceeds the 60 samples"),
    # the held-out tenth is not in the prompt
    ("softmax", "prompt_size", 58, "prompt_size=58 exceeds the 54 samples left to train on"),
]


@pytest.mark.parametrize(
    "name, parameter, value, match",
    [pytest.param(*case, id=f"{case[0]}-{case[1]}={case[2]!r}") for case in SEMANTIC_INVALID],
)
def test_semantically_invalid_hyperparameter(fitted, name, parameter, value, match):
    estimator = copy.deepcopy(fitted[name])
    before = predictions(estimator)
    original = estimator.get_params()[parameter]
    estimator.set_params(**{parameter: value})
    with pytest.raises(ValueError, match=match):
        call(estimator, "fit", NOISY)
    estimator.set_params(**{parameter: original})
    assert np.array_equal(predictions(estimator), before)


@pytest.mark.parametrize("name", ["softmax", "linear"])
@pytest.mark.parametrize(
    "prompt, exception, match",
    [
        (np.full((5, 2), np.nan), ValueError, "prompt contains NaN"),
        (np.empty((0, 2)), ValueError, r"0 sample\(s\)"),
        (np.ones((5, 3)), ValueError, "prompt has 3 features.*expecting 2"),
        (np.ones(5), ValueError, "Expected 2D array"),
        (scipy.sparse.csr_matrix(np.ones((5, 2))), TypeError, "[Ss]parse"),
    ],
    ids=["nan", "empty", "n_features", "1d", "sparse"],
)
def test_bad_transform_prompt(fitted, name, prompt, exception, match):
    estimator = copy.deepcopy(fitted[name])
    before = predictions(estimator)
    with pytest.raises(exception, match=match):
        estimator.transform(QUERIES, prompt=prompt)
    assert np.array_equal(predictions(estimator), before)


@pytest.mark.parametrize("name", ["softmax", "linear"])
def test_no_targets_and_no_noise_variance(fitted, name):
    estimator = copy.deepcopy(fitted[name])
    before = predictions(estimator)
    estimator.set_params(noise_variance=None)
    with pytest.raises(ValueError, match="needs either y.*or noise_variance"):
        estimator.fit(NOISY)
    estimator.set_params(noise_variance=4.0)
    assert np.array_equal(predictions(estimator), before)


# -- confusing errors found by issue 13 ----------------------------------------


@pytest.mark.parametrize("name", ["softmax", "linear"])
@pytest.mark.parametrize("parameter", ["n_heads", "residual", "n_layers"])
def test_partial_fit_refuses_a_changed_architecture(name, parameter):
    estimator = ESTIMATORS[name]().partial_fit(NOISY, CLEAN)
    if parameter not in estimator.get_params():
        pytest.skip(f"{name} has no {parameter}")
    before = predictions(estimator)
    value = estimator.get_params()[parameter]
    estimator.set_params(**{parameter: not value if isinstance(value, bool) else value + 1})
    with pytest.raises(
        ValueError, match=f"partial_fit continues the fitted parameters, but {parameter} from"
    ):
        estimator.partial_fit(NOISY, CLEAN)
    estimator.set_params(**{parameter: value})
    assert np.array_equal(predictions(estimator), before)


def test_bayes_denoiser_checks_its_covariances_at_fit():
    nearly = np.array([[1.0, 1.0 + 1e-9], [1.0 + 1e-9, 1.0]])  # PSD up to rounding
    denoiser = BayesDenoiser(MEANS, covariance=nearly, noise_variance=1e-300)
    with pytest.raises(ValueError, match=r"noisy_covariances\[0\] must be symmetric positive"):
        denoiser.fit(NOISY)  # before: accepted, then transform failed
    assert not hasattr(denoiser, "means_")


@pytest.mark.parametrize("name", ["softmax", "linear"])
@pytest.mark.parametrize("value", [np.inf, np.nan, 0.0])
def test_sure_needs_a_finite_positive_noise_variance(fitted, name, value):
    with pytest.raises(ValueError, match="noise_variance must be positive and finite"):
        fitted[name].sure(QUERIES, noise_variance=value)


@pytest.mark.parametrize("name", ["softmax", "linear", "gmm", "bayes"])
def test_score_keeps_float64_targets_of_float32_data(fitted, name):
    """``y`` beyond float32's range is valid float64: scored, not rejected."""
    score = fitted[name].score(QUERIES.astype(np.float32), CLEAN[:10] * 1e39)
    assert np.isfinite(score) and score < -1e70


def test_cli_max_samples_too_small_is_one_line():
    from sk_softmix.study import main

    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--quick", "--folds", "2", "--max-samples", "5", "--tasks", "C1"])
    assert exit_info.value.code == 2
