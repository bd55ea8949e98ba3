"""Turning the ``device`` parameter into a torch device, and arrays into tensors."""

import numpy as np
import torch

from ._threads import limit_threads_in_dask_worker


def resolve_device(device: str) -> torch.device:
    """Map ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` to a usable device.

    ``"auto"`` picks CUDA when a GPU is visible. An explicit CUDA request on a
    machine without one is an error rather than a silent fall-back, so that a
    benchmark never reports CPU numbers under a GPU label.

    Called as an estimator starts to fit or transform, it also caps torch's
    threads inside a Dask worker thread (see ``_threads``).
    """
    limit_threads_in_dask_worker()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device={device!r} is not a valid torch device.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this "
            "machine; use device='cpu' or device='auto'."
        )
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r} is not supported; use 'cpu' or 'cuda'.")
    return resolved


def as_tensor(array: np.ndarray, device: torch.device, dtype=None) -> torch.Tensor:
    """A tensor on ``device`` sharing memory with ``array`` where possible.

    A read-only array (a pandas 3 frame's values, a joblib memory map) is
    copied: torch has no read-only tensors and warns on sharing one.
    """
    array = np.ascontiguousarray(array)
    if not array.flags.writeable:
        array = array.copy()
    tensor = torch.from_numpy(array)
    return tensor.to(device=device, dtype=dtype)
