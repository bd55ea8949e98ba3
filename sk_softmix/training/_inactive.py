"""Settings that cannot act in a fit, named in a warning.

scikit-learn warns where a parameter is set but unused at the other
settings (``LogisticRegression``'s ``l1_ratio`` without an elastic-net
penalty); a grid search over such a parameter would otherwise burn its
compute for one score. The attention estimators' kernel heads are tuned on
a grid in closed form, so the training parameters of the paper's bilinear
heads do nothing there.
"""

import inspect
import warnings


def changed_from_default(estimator, names) -> dict:
    """``name -> value`` for the parameters in ``names`` not at their default."""
    defaults = inspect.signature(type(estimator).__init__).parameters
    params = estimator.get_params(deep=False)
    return {name: params[name] for name in names if not _same(params[name], defaults[name].default)}


def warn_inactive(estimator, names, reason: str, *, stacklevel: int = 3) -> None:
    """Warn, naming them, where parameters of ``names`` are set but cannot act.

    ``max_iter`` counts as acting whenever it is 0 (it switches training, or
    the heads, off), so only its other values are named.
    """
    changed = changed_from_default(estimator, names)
    if changed.get("max_iter", 1) == 0:
        del changed["max_iter"]
    if not changed:
        return
    settings = ", ".join(f"{name}={value!r}" for name, value in changed.items())
    warnings.warn(
        f"{type(estimator).__name__}: {settings} change nothing here: {reason}",
        UserWarning,
        stacklevel=stacklevel,
    )


def _same(value, default) -> bool:
    try:
        return bool(value == default)
    except (TypeError, ValueError):  # arrays and other values without one truth value
        return False
