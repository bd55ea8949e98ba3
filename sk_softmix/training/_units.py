"""The units training runs in: data divided by its root-mean-square, an exact
symmetry of every model of the package, and the parameters' conversions to and from them."""

import math

import numpy as np
import torch


def rms_scale(X: np.ndarray) -> float:
    """Root-mean-square of the entries of ``X``, or 1 for an all-zero ``X``.

    Training runs on data divided by this scale, where every model of the
    package has the same form with rescaled parameters.
    """
    # Divided by its largest entry first: squares of entries beyond 1e154
    # overflow float64 and those below 1e-162 vanish, at any data scale.
    largest = float(np.max(np.abs(X))) if np.size(X) else 0.0
    if not largest > 0:
        return 1.0
    return largest * math.sqrt(float(np.mean(np.square(X / largest, dtype=np.float64))))


def power_of_two_scale(X: np.ndarray) -> float:
    """:func:`rms_scale` rounded to the nearest power of two: dividing by it
    rounds nothing, so a constant column stays exactly constant."""
    return 2.0 ** np.round(np.log2(rms_scale(X)))


# Scales whose square float64 still holds with room for the parameters
# (U scales as 1 / scale**2, a noise variance as scale**2).
SMALLEST_SCALE, LARGEST_SCALE = 1e-151, 1e151


def checked_scale(X: np.ndarray, estimator_name: str) -> float:
    """``rms_scale(X)``, or a ``ValueError`` naming a scale float64 cannot serve.

    Every estimator is scale-equivariant, ``f(cX) = c f(X)``, by working on
    ``X / scale``; its fitted parameters and noise variance then hold powers
    of ``scale`` up to the square, which leave float64 beyond about 1e+-154.
    """
    scale = rms_scale(X)
    if not SMALLEST_SCALE <= scale <= LARGEST_SCALE:
        raise ValueError(
            f"{estimator_name}: the root-mean-square of X is {scale:.3g}, outside "
            f"[{SMALLEST_SCALE:g}, {LARGEST_SCALE:g}]: parameters that scale with its "
            "square (interaction matrices, the noise variance) cannot be represented "
            "in float64. Rescale X: the estimators are scale-equivariant (a "
            "denoiser's output scales with X, a classifier's predictions do not "
            "change)."
        )
    return scale


def to_training_units(parameters: dict, scale: float, powers: dict, device) -> dict:
    """Float32 leaf tensors ``value * scale**power``, ready to train."""
    return {
        name: torch.as_tensor(value * scale ** powers[name], dtype=torch.float32, device=device)
        .contiguous()
        .requires_grad_(True)
        for name, value in parameters.items()
    }


def to_data_units(parameters: dict, scale: float, powers: dict) -> dict:
    """NumPy float64 parameters in the data's units (the inverse of the above)."""
    return {
        name: tensor.detach().cpu().numpy().astype(np.float64) / scale ** powers[name]
        for name, tensor in parameters.items()
    }
