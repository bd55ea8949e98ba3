"""One train/test comparison of every denoiser on the paper's Figure 2 task."""

import time

import numpy as np

from ..datasets import make_gaussian_mixture
from ..denoising._bayes import BayesDenoiser
from ._estimators import BAYES, denoisers
from ._tasks import FIGURE_2, Task


def compare_denoisers(
    n_samples: int = 20_000,
    n_test: int = 20_000,
    *,
    device: str = "auto",
    random_state: int = 0,
    verbose: int = 0,
) -> list[dict]:
    """Fit every denoiser on the Figure 2 task and measure it on fresh points.

    Parameters
    ----------
    n_samples : int, default=20_000
        Noisy training points (the attention denoisers' prompt).
    n_test : int, default=20_000
        Test points, shared by every method.
    device : str, default="auto"
        Device of the attention denoisers.
    random_state : int, default=0
        Seed of the data and of every estimator.
    verbose : int, default=0
        Passed to the attention denoisers.

    Returns
    -------
    list of dict
        One row per method: ``method``, ``mse``, ``mse_over_bayes``,
        ``fit_seconds``, ``transform_seconds``.

    Examples
    --------
    >>> from sk_softmix.study import compare_denoisers
    >>> rows = compare_denoisers(n_samples=300, n_test=300, device="cpu")
    >>> [row["method"] for row in rows][-1]
    'Bayes (oracle)'
    """
    mixture = FIGURE_2
    Z, X, _ = make_gaussian_mixture(n_samples, **mixture, random_state=random_state)
    Z_test, X_test, _ = make_gaussian_mixture(n_test, **mixture, random_state=random_state + 1)
    # the study's own list of denoisers, at its full-mode settings
    task = Task(
        "figure2",
        "",
        Z,
        X,
        BayesDenoiser(**mixture),
        mixture["noise_variance"],
        len(mixture["means"]),
    )
    methods = denoisers(task, quick=False, device=device, random_state=random_state)
    for estimator in methods.values():
        if "verbose" in estimator.get_params():
            estimator.set_params(verbose=verbose)
    rows = []
    for name, estimator in methods.items():
        start = time.perf_counter()
        estimator.fit(Z, X)
        fitted = time.perf_counter()
        denoised = estimator.predict(Z_test)  # the affine map is a regressor
        done = time.perf_counter()
        rows.append(
            {
                "method": name,
                "mse": float(np.mean((denoised - X_test) ** 2)),
                "fit_seconds": fitted - start,
                "transform_seconds": done - fitted,
            }
        )
    oracle = next(row["mse"] for row in rows if row["method"] == BAYES)
    for row in rows:
        row["mse_over_bayes"] = row["mse"] / oracle
    return rows


def format_table(rows: list[dict]) -> str:
    """Rows of :func:`compare_denoisers` as a Markdown table.

    Parameters
    ----------
    rows : list of dict
        As returned by :func:`compare_denoisers`.

    Returns
    -------
    str
        A header, a separator and one line per method.

    Examples
    --------
    >>> from sk_softmix.study import format_table
    >>> row = {"method": "BayesDenoiser (oracle)", "mse": 1.48, "mse_over_bayes": 1.0,
    ...        "fit_seconds": 0.0, "transform_seconds": 0.01}
    >>> print(format_table([row]).splitlines()[-1])
    | BayesDenoiser (oracle) | 1.4800 | 1.000 | 0.00 | 0.01 |
    """
    lines = [
        "| method | test MSE | MSE / Bayes | fit (s) | transform (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['method']} | {row['mse']:.4f} | {row['mse_over_bayes']:.3f} "
            f"| {row['fit_seconds']:.2f} | {row['transform_seconds']:.2f} |"
        )
    return "\n".join(lines)
