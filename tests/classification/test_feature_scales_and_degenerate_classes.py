"""The default classifier on data at any scale and on classes without spread.

Each case had a wrong answer or an unrelated error: XOR at scale 1e19 or
1e-20 lost its kernel heads (their bandwidth search ran in float32 on the
raw features, whose squared distances overflowed or underflowed), classes of
zero within-class variance raised scikit-learn's ``IndexError``, and two
samples per class failed in the linear start's cross-validation.
"""

import warnings

import numpy as np
import pytest

from sk_softmix import SoftmaxAttentionClassifier


def _xor(n, random_state):
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] * X[:, 1] > 0).astype(int)


# the default (whichever start and heads it keeps, the same at every scale)
# and kernel heads on LDA's start
MODELS = {"default": ({}, None), "kernel heads": ({"head": "kernel", "init": "lda"}, "kernel")}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale", [1e-20, 1e19, 1e100, 1e-100])
def test_any_representable_scale_gives_the_unit_scale_model(scale, dtype, model):
    X, y = _xor(300, 0)
    queries, labels = _xor(500, 1)
    if dtype == np.float32 and not 1e-30 < scale < 1e30:
        pytest.skip("the data itself is not representable in float32")
    params, kept = MODELS[model]
    unit = SoftmaxAttentionClassifier(random_state=0, **params).fit(X.astype(dtype), y)
    scaled = SoftmaxAttentionClassifier(random_state=0, **params).fit((X * scale).astype(dtype), y)
    assert unit.init_ == scaled.init_ and unit.linear_start_ == scaled.linear_start_
    assert kept is None or unit.init_ == kept
    # the model works at root-mean-square within a factor sqrt(2) of 1 (a
    # power-of-two rescaling), where the bandwidths are searched in float32:
    # the two fits differ by float32 rounding of the bandwidth (1e-7 relative),
    # and float32 queries by their own rounding too
    np.testing.assert_allclose(
        scaled.predict_proba((queries * scale).astype(dtype)),
        unit.predict_proba(queries.astype(dtype)),
        rtol=0,
        atol=1e-4 if dtype == np.float32 else 1e-5,
    )
    assert np.mean(scaled.predict((queries * scale).astype(dtype)) == labels) > 0.9


@pytest.mark.parametrize(
    "case",
    ["all zero", "identical rows", "one point per class", "boolean"],
)
def test_classes_without_spread(case):
    rng = np.random.default_rng(2)
    y = np.repeat([0, 1, 2], 10)
    X = {
        "all zero": np.zeros((30, 3)),
        "identical rows": np.ones((30, 3)),
        "one point per class": np.repeat(np.eye(3), 10, axis=0),
        "boolean": rng.random((30, 3)) > 0.5,
    }[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    proba = model.predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    if case in ("all zero", "identical rows"):
        # nothing tells the classes apart: the (equal) priors
        np.testing.assert_allclose(proba, 1 / 3)
    if case == "one point per class":
        assert np.array_equal(model.predict(X), y)
    if case != "boolean":  # a class of one distinct point has nothing to leave out
        assert any("single distinct point" in str(w.message) for w in caught)


def test_two_samples_per_class_fits():
    rng = np.random.default_rng(3)
    X = np.r_[rng.normal(size=(2, 2)) - 3, rng.normal(size=(2, 2)) + 3]
    model = SoftmaxAttentionClassifier(random_state=0).fit(X, [0, 0, 1, 1])
    assert np.array_equal(model.predict(X), [0, 0, 1, 1])
