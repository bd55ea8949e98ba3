"""Module paths of earlier releases, still importable.

The package moved into subpackages after 0.1.0.dev0. Two kinds of old path
keep working, through one import hook (so that the folder keeps no stub
files):

- the public theory modules, once at the top (``sk_softmix.lda``,
  ``constructions``, ``population``, ``risk``, ``dynamics``), now in
  :mod:`sk_softmix.theory`: importing them by the old name works and warns
  (``FutureWarning``) with the new one;
- the private modules that held the estimators and the non-local head
  (``sk_softmix._classifier``, ...): pickles and skops files name a class by
  its module, so models saved before the move name these. They resolve
  silently, since a user loading a model did not choose the path.

An old path is a module of its own whose attributes are looked up on the
new module at each access, so both paths give the same objects.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

PUBLIC_MOVES = {
    f"sk_softmix.{name}": f"sk_softmix.theory.{name}"
    for name in ("lda", "constructions", "population", "risk", "dynamics")
}

SAVED_CLASS_MOVES = {
    "sk_softmix._classifier": "sk_softmix.classification._classifier",
    "sk_softmix._softmax_denoiser": "sk_softmix.denoising._softmax",
    "sk_softmix._linear_denoiser": "sk_softmix.denoising._linear",
    "sk_softmix._gmm_denoiser": "sk_softmix.denoising._gaussian_mixture",
    "sk_softmix._bayes_denoiser": "sk_softmix.denoising._bayes",
    "sk_softmix._nonlocal_fit": "sk_softmix.image._nonlocal_fit",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as a view of its new module."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in PUBLIC_MOVES or fullname in SAVED_CLASS_MOVES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None  # a plain new module, filled in by exec_module

    def exec_module(self, module):
        name = module.__name__
        new_name = PUBLIC_MOVES.get(name) or SAVED_CLASS_MOVES[name]
        new = importlib.import_module(new_name)
        if name in PUBLIC_MOVES:
            # stacklevel 2 is the importing line: warnings skips import machinery frames
            warnings.warn(
                f"{name} moved to {new_name}; import it from there. The old path "
                "will be removed in a later release.",
                FutureWarning,
                stacklevel=2,
            )
        module.__doc__ = f"Moved to :mod:`{new_name}`."
        module.__all__ = getattr(new, "__all__", None) or [
            attribute
            for attribute, value in vars(new).items()
            if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
        ]
        module.__getattr__ = lambda attribute: getattr(new, attribute)
        module.__dir__ = lambda: dir(new)


def install() -> None:
    """Put the hook on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
