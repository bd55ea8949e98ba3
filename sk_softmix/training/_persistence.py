"""Models saved by an earlier release, whole when loaded.

A pickle or skops file holds an estimator's ``__dict__`` as it was when the
model was saved. A constructor parameter added since (``head`` of the
classifier, ``cv`` of the Gaussian-mixture denoiser, ...) is then missing
from the loaded object, and everything that reads the parameters,
``repr``, ``get_params``, :func:`sklearn.base.clone` and so
``GridSearchCV``, raises ``AttributeError``. scikit-learn expects estimators
to stay usable across releases; the mixin below gives such a model each
missing parameter at its current default when it is loaded.

The fitted state is left as it was saved, so the loaded model's outputs are
the old model's. The defaults describe what a refit (a ``clone`` in a grid
search or a cross-validation) does with the current release, which is what
the parameters of any estimator describe.
"""

import inspect


def constructor_defaults(estimator_class) -> dict:
    """``{parameter: default}`` of ``estimator_class.__init__``, keyword ones only.

    Parameters
    ----------
    estimator_class : type
        A scikit-learn estimator class: every parameter of its ``__init__``
        but ``self`` has a default.

    Returns
    -------
    dict
        The parameters in the order of the signature.
    """
    signature = inspect.signature(estimator_class.__init__)
    return {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if name != "self" and parameter.default is not inspect.Parameter.empty
    }


class ParametersAddedSinceMixin:
    """On loading, set each constructor parameter the saved state lacks to its default.

    Put it first among an estimator's bases: its ``__setstate__`` runs
    scikit-learn's (which warns when the file was written by another
    scikit-learn version), then fills the gaps. Both pickle and
    ``skops.io.load`` restore an object through ``__setstate__``.
    """

    def __setstate__(self, state):
        super().__setstate__(state)
        for name, default in constructor_defaults(type(self)).items():
            if name not in self.__dict__:
                setattr(self, name, default)
