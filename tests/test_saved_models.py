"""Models saved by an earlier release still load, whole, and give the same outputs.

The files in ``fixtures/saved_0.1.0.dev0/`` were pickled and saved with skops
before the package moved into subpackages (see ``make_saved_models.py``), so
they name module paths that no longer hold the classes, and they predate
constructor parameters added since (the classifier's and the softmax
denoiser's ``head``, the Gaussian-mixture denoiser's ``cv`` and
``fallback``). Loading them checks that those paths still resolve, that the
loaded models give the outputs they gave then, and that they are whole
estimators: they print, clone, take ``set_params`` and go through a grid
search.

The outputs are compared within the rounding a different processor brings,
not bit for bit: the fixtures were written on one machine, and another
processor's BLAS kernels (vector width, blocking) sum the same matrix
products in another order.
"""

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from sk_softmix.training._persistence import constructor_defaults

SAVED = Path(__file__).parent / "fixtures" / "saved_0.1.0.dev0"
EXPECTED = np.load(SAVED / "expected.npz")
NAMES = sorted({key.split("/")[0] for key in EXPECTED.files})
ESTIMATORS = [name for name in NAMES if name != "nonlocal_head"]  # the head is a dataclass
SKOPS_NAMES = [name for name in NAMES if (SAVED / f"{name}.skops").exists()]

# Every float64 output here comes from 60 training points in 2 or 3
# dimensions. Summing n terms in another order moves the sum by at most about
# n rounding units of its largest term, so 60 units (float64 eps) of the
# output's largest entry bound what another processor's kernels change
# (observed with OPENBLAS_CORETYPE=Sandybridge MKL_ENABLE_INSTRUCTIONS=AVX
# ATEN_CPU_CAPABILITY=default: at most 4e-16 of the largest entry).
N_TRAINING_POINTS = 60
FLOAT64_ROUNDING = N_TRAINING_POINTS * np.finfo(np.float64).eps
# The non-local head sums its weighted patches in float32 in an order that
# also follows torch's thread count: 8 float32 rounding units of the image's
# values (about 1) bound it (observed: 1.6 units).
FLOAT32_ROUNDING = 8 * np.finfo(np.float32).eps


def _load_pickle(name):
    with open(SAVED / f"{name}.pkl", "rb") as file:
        return pickle.load(file)


def _load_skops(name):
    sio = pytest.importorskip("skops.io")
    path = SAVED / f"{name}.skops"
    untrusted = sio.get_untrusted_types(file=path)
    assert len(untrusted) == 1 and untrusted[0].startswith("sk_softmix.")
    return sio.load(path, trusted=untrusted)


def _assert_same_outputs(model, name):
    X = EXPECTED[f"{name}/input"]
    methods = [key.split("/")[1] for key in EXPECTED.files if key.startswith(f"{name}/")]
    for method in methods:
        if method in ("input", "predict"):
            continue
        got = model.apply(X, device="cpu") if method == "apply" else getattr(model, method)(X)
        expected = EXPECTED[f"{name}/{method}"]
        assert got.dtype == expected.dtype, method
        rounding = FLOAT32_ROUNDING if method == "apply" else FLOAT64_ROUNDING
        atol = rounding * max(1.0, np.abs(expected).max())
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol, err_msg=method)
    if f"{name}/predict" in EXPECTED.files:
        # a label may only change where the recorded probabilities of the two
        # likeliest classes tie to within that rounding
        proba = np.sort(EXPECTED[f"{name}/predict_proba"], axis=1)
        tied = proba[:, -1] - proba[:, -2] <= 2 * FLOAT64_ROUNDING
        changed = model.predict(X) != EXPECTED[f"{name}/predict"]
        assert not np.any(changed & ~tied)


def test_every_saved_model_is_checked():
    assert len(NAMES) == 7
    assert all((SAVED / f"{name}.pkl").exists() for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_saved_pickle_loads(name):
    _assert_same_outputs(_load_pickle(name), name)


@pytest.mark.parametrize("name", SKOPS_NAMES)
def test_saved_skops_file_loads(name):
    _assert_same_outputs(_load_skops(name), name)


@pytest.mark.parametrize("load", [_load_pickle, _load_skops], ids=["pickle", "skops"])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_loaded_model_has_every_parameter(name, load):
    model = load(name)
    defaults = constructor_defaults(type(model))
    params = model.get_params()
    assert set(params) == set(defaults)
    assert type(model).__name__ in repr(model)
    twin = clone(model)
    assert repr(twin) == repr(model)
    twin.set_params(**defaults)
    assert all(getattr(twin, key) is value for key, value in defaults.items())


def test_parameters_added_since_get_their_defaults():
    # the fixtures predate these parameters: each is set to its default on
    # loading, while the saved ones keep their saved values
    classifier = _load_pickle("classifier")
    assert classifier.head == "auto" and classifier.max_iter == 3
    mixture = _load_pickle("gmm_denoiser")
    defaults = constructor_defaults(type(mixture))
    assert mixture.cv == defaults["cv"] and mixture.fallback == defaults["fallback"]
    assert mixture.noise_variance == 1.0


@pytest.mark.parametrize("name", ["classifier", "gmm_denoiser", "linear_denoiser"])
def test_a_loaded_model_goes_through_a_grid_search(name):
    model = _load_pickle(name)
    X = EXPECTED[f"{name}/input"]
    if name == "classifier":
        y = model.predict(X)  # the saved model's own labels: two classes, 30 points each
        grid, fit_args = {"alpha": [0.01, 0.1]}, (X, y)
    else:
        grid, fit_args = {"noise_variance": [0.5, 1.0]}, (X,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small-sample warnings of the refits
        search = GridSearchCV(model, grid, cv=2).fit(*fit_args)
    assert search.best_estimator_.get_params().keys() == model.get_params().keys()
    assert np.isfinite(search.best_score_)
