"""The classifier's training set as tokens (``_training_data.training_tokens``),
tested as a plain function of values."""

import numpy as np
import pytest

from sk_softmix.classification._kernel_fit import uses_kernel_heads
from sk_softmix.classification._training_data import feature_standardisation, training_tokens


def _tokens(X, y, sample_weight=None, kernel=True, standardize="auto"):
    return training_tokens(
        X,
        y,
        sample_weight,
        class_weight=None,
        kernel=kernel,
        standardize=standardize,
        warn_unstandardised=True,
    )


def test_repeated_rows_become_one_token_in_the_same_coordinates():
    rng = np.random.default_rng(0)
    X = rng.normal(loc=5.0, scale=[1.0, 30.0], size=(40, 2))  # far from standardised
    y = rng.integers(2, size=40)
    once = _tokens(X, y)
    twice = _tokens(np.r_[X, X[:10]], np.r_[y, y[:10]])
    assert len(twice.X) == 40 and twice.weights is not None
    assert np.all(twice.weights[:10] == 2.0) and np.all(twice.weights[10:] == 1.0)
    # the weighted standardisation of the tokens is that of the rows themselves
    rows = np.r_[X, X[:10]]
    assert np.allclose(twice.feature_mean, rows.mean(axis=0))
    assert np.allclose(twice.feature_scale, rows.std(axis=0))
    assert not np.allclose(once.feature_mean, twice.feature_mean)
    assert np.allclose(twice.X, (X - rows.mean(axis=0)) / rows.std(axis=0))


def test_bilinear_tokens_are_every_row_and_refuse_unequal_weights():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(30, 3)), np.repeat([0, 1], 15)
    tokens = _tokens(np.r_[X, X[:5]], np.r_[y, y[:5]], kernel=False)
    assert len(tokens.X) == 35 and tokens.rows is None and tokens.weights is None
    assert _tokens(X, y, np.full(30, 3.0), kernel=False).weights is None
    with pytest.raises(ValueError, match="bilinear heads take no weights"):
        _tokens(X, y, np.r_[np.ones(15), 2 * np.ones(15)], kernel=False)


def test_kernel_tokens_of_data_at_any_scale_come_at_unit_root_mean_square():
    rng = np.random.default_rng(2)
    X, y = 1e-20 * rng.normal(size=(50, 2)), np.repeat([0, 1], 25)
    tokens = _tokens(X, y, standardize=False)
    assert 0.5 < np.sqrt(np.mean(np.square(tokens.X))) < 2.0
    scale = tokens.feature_scale[0]
    assert scale == 2.0 ** np.round(np.log2(scale))  # a power of two: rounds nothing


def test_one_class_is_refused():
    with pytest.raises(ValueError, match="at least 2 classes"):
        _tokens(np.zeros((5, 2)), np.zeros(5))


def test_weighted_standardisation_keeps_constant_columns_at_scale_one():
    X = np.c_[np.arange(6.0), np.full(6, 1e8)]
    mean, scale = feature_standardisation(X, True, np.arange(1.0, 7.0))
    assert scale[1] == 1.0 and mean[1] == 1e8
    assert np.isclose(mean[0], np.average(np.arange(6.0), weights=np.arange(1.0, 7.0)))


@pytest.mark.parametrize(
    "head, init, residual, expected",
    [
        ("auto", "auto", True, True),
        ("auto", "lda", True, False),
        ("bilinear", "auto", True, False),
        ("kernel", "lda", True, True),
        ("auto", "zero", False, False),
    ],
)
def test_which_heads(head, init, residual, expected):
    assert uses_kernel_heads(head, init, residual) is expected


@pytest.mark.parametrize(
    "head, init, residual, message",
    [
        ("kernel", "auto", False, "needs residual=True"),
        ("kernel", "bayes", True, "start of the paper's bilinear heads"),
        ("bilinear", "lda", False, "init='lda' puts LDA's score"),
    ],
)
def test_heads_that_do_not_exist(head, init, residual, message):
    with pytest.raises(ValueError, match=message):
        uses_kernel_heads(head, init, residual)
