"""Module paths of earlier releases, still importable.

The package moved into subpackages after 0.1.0.dev0. Two kinds of old path
keep working, through one import hook (so that the folder keeps no stub
files):

- the public theory modules, once at the top (``sk_softmix.lda``,
  ``constructions``, ``population``, ``risk``, ``dynamics``), now in
  :mod:`sk_softmix.theory` (``lda`` split into ``lda`` and
  ``lda_dynamics``, ``constructions`` into ``constructions`` and
  ``affine_maps``): importing them by the old name works and warns
  (``FutureWarning``) with the new ones;
- the private modules that held the estimators and the non-local head
  (``sk_softmix._classifier``, ...): pickles and skops files name a class by
  its module, so models saved before the move name these. They resolve
  silently, since a user loading a model did not choose the path.

An old path is a module of its own whose attributes are looked up on the
new modules at each access, so both paths give the same objects.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

# old path -> the new modules that share its names, looked up in order
PUBLIC_MOVES = {
    "sk_softmix.lda": ("sk_softmix.theory.lda", "sk_softmix.theory.lda_dynamics"),
    "sk_softmix.constructions": (
        "sk_softmix.theory.constructions",
        "sk_softmix.theory.affine_maps",
    ),
    "sk_softmix.population": ("sk_softmix.theory.population",),
    "sk_softmix.risk": ("sk_softmix.theory.risk",),
    "sk_softmix.dynamics": ("sk_softmix.theory.dynamics",),
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
        new_names = PUBLIC_MOVES.get(name) or (SAVED_CLASS_MOVES[name],)
        modules = [importlib.import_module(new_name) for new_name in new_names]
        shown = " and ".join(new_names)
        if name in PUBLIC_MOVES:
            # stacklevel 2 is the importing line: warnings skips import machinery frames
            warnings.warn(
                f"{name} moved to {shown}; import it from there. The old path "
                "will be removed in a later release.",
                FutureWarning,
                stacklevel=2,
            )
        module.__doc__ = f"Moved to {shown}."
        module.__all__ = [
            attribute
            for new in modules
            for attribute in getattr(new, "__all__", None) or _public_names(new)
        ]

        def __getattr__(attribute):
            for new in modules:
                if hasattr(new, attribute):
                    return getattr(new, attribute)
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

        module.__getattr__ = __getattr__
        module.__dir__ = lambda: sorted({a for new in modules for a in dir(new)})


def _public_names(module) -> list[str]:
    return [
        attribute
        for attribute, value in vars(module).items()
        if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
    ]


def install() -> None:
    """Put the hook on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
