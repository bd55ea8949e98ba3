"""Every public import path of 0.1.0.dev0 still works after the move into subpackages.

``fixtures/public_names_0.1.0.dev0.json`` lists, module by module, the public
names that each public module held before the move. The modules that stayed
(the package, ``attention``, ``image``, ``datasets``, ``study``) give them
silently; the theory modules that moved into ``sk_softmix.theory`` give them
with a FutureWarning naming the new path, and the same objects.
"""

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

PUBLIC_NAMES = json.loads(
    (Path(__file__).parent / "fixtures" / "public_names_0.1.0.dev0.json").read_text()
)
# old path -> the modules that hold its names now (two of them were split by job)
NEW_HOMES = {
    "sk_softmix.lda": ("sk_softmix.theory.lda", "sk_softmix.theory.lda_dynamics"),
    "sk_softmix.constructions": (
        "sk_softmix.theory.constructions",
        "sk_softmix.theory.affine_maps",
    ),
    "sk_softmix.population": ("sk_softmix.theory.population",),
    "sk_softmix.risk": ("sk_softmix.theory.risk",),
    "sk_softmix.dynamics": ("sk_softmix.theory.dynamics",),
}
MOVED = set(NEW_HOMES)


@pytest.fixture(scope="module")
def warnings_of_old_imports():
    """Module -> warnings that ``from module import <its names>`` gives, each
    module imported for the first time in one fresh interpreter."""
    code = f"""
import json, warnings
found = {{}}
for module, names in {PUBLIC_NAMES!r}.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(f"from {{module}} import {{', '.join(names)}}", {{}})
    found[module] = [[w.category.__name__, str(w.message), w.filename] for w in caught]
print(json.dumps(found))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES))
def test_every_public_name_imports_from_its_old_path(module, warnings_of_old_imports):
    caught = warnings_of_old_imports[module]
    if module in MOVED:
        assert [category for category, _, _ in caught] == ["FutureWarning"]
        assert all(home in caught[0][1] for home in NEW_HOMES[module])
        assert caught[0][2] == "<string>"  # points at the importing line
    else:
        assert caught == []


@pytest.mark.parametrize("module", sorted(MOVED))
def test_old_theory_paths_give_the_same_objects(module):
    homes = [importlib.import_module(home) for home in NEW_HOMES[module]]
    with pytest.warns(FutureWarning, match="moved to sk_softmix.theory"):
        sys.modules.pop(module, None)
        old = importlib.import_module(module)
    for name in PUBLIC_NAMES[module]:
        home = next(home for home in homes if name in vars(home))
        assert getattr(old, name) is getattr(home, name)
    assert set(PUBLIC_NAMES[module]) <= set(dir(old))
    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        old.not_a_name  # noqa: B018


def test_star_import_from_an_old_path():
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        exec("from sk_softmix.risk import *", namespace)
    assert {"bayes_risk", "best_linear_risk", "best_affine_risk"} <= set(namespace)


@pytest.mark.parametrize(
    "old, name",
    [
        ("sk_softmix._classifier", "SoftmaxAttentionClassifier"),
        ("sk_softmix._softmax_denoiser", "SoftmaxAttentionDenoiser"),
        ("sk_softmix._linear_denoiser", "LinearAttentionDenoiser"),
        ("sk_softmix._gmm_denoiser", "GaussianMixtureDenoiser"),
        ("sk_softmix._bayes_denoiser", "BayesDenoiser"),
        ("sk_softmix._nonlocal_fit", "NonLocalHead"),
    ],
)
def test_module_paths_of_saved_models_resolve_silently(old, name):
    import sk_softmix
    import sk_softmix.image

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(old)
    current = getattr(sk_softmix, name, None) or getattr(sk_softmix.image, name)
    assert getattr(module, name) is current


def test_an_unknown_old_path_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sk_softmix._no_such_module")
