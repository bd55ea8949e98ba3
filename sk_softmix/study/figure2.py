"""The comparison study: every denoiser on a built-in mixture, one table.

Run it as ``python -m sk_softmix compare`` (or ``sk-softmix compare``).
"""

import argparse
import sys
import time

import numpy as np

from ._bayes_denoiser import BayesDenoiser
from ._device import resolve_device
from ._gmm_denoiser import GaussianMixtureDenoiser
from ._linear_denoiser import LinearAttentionDenoiser
from ._softmax_denoiser import SoftmaxAttentionDenoiser
from .datasets import make_gaussian_mixture
from .risk import bayes_risk, best_linear_risk

# The paper's Figure 2 task: two clusters in the plane, gamma = 1, xi = 2.
FIGURE_2 = {"means": np.array([[3.0, 0.0], [0.0, 3.0]]), "covariance": 1.0, "noise_variance": 4.0}


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
    'BayesDenoiser (oracle)'
    """
    task = FIGURE_2
    Z, X, _ = make_gaussian_mixture(n_samples, **task, random_state=random_state)
    Z_test, X_test, _ = make_gaussian_mixture(n_test, **task, random_state=random_state + 1)
    common = {"device": device, "random_state": random_state, "verbose": verbose}
    methods = {
        "SoftmaxAttentionDenoiser (2 residual heads)": SoftmaxAttentionDenoiser(**common),
        "SoftmaxAttentionDenoiser (2 plain heads)": SoftmaxAttentionDenoiser(
            residual=False, **common
        ),
        "SoftmaxAttentionDenoiser (1 plain head)": SoftmaxAttentionDenoiser(
            n_heads=1, residual=False, **common
        ),
        "LinearAttentionDenoiser": LinearAttentionDenoiser(**common),
        "GaussianMixtureDenoiser": GaussianMixtureDenoiser(
            noise_variance=task["noise_variance"], random_state=random_state
        ),
        "BayesDenoiser (oracle)": BayesDenoiser(**task),
    }
    rows = []
    for name, estimator in methods.items():
        start = time.perf_counter()
        estimator.fit(Z, X)
        fitted = time.perf_counter()
        denoised = estimator.transform(Z_test)
        done = time.perf_counter()
        rows.append(
            {
                "method": name,
                "mse": float(np.mean((denoised - X_test) ** 2)),
                "fit_seconds": fitted - start,
                "transform_seconds": done - fitted,
            }
        )
    oracle = rows[-1]["mse"]
    for row in rows:
        row["mse_over_bayes"] = row["mse"] / oracle
    return rows


def format_table(rows: list[dict]) -> str:
    """Rows of :func:`compare_denoisers` as a Markdown table."""
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


def main(argv: list[str] | None = None) -> int:
    """Command line: ``compare`` runs the study and prints the table."""
    parser = argparse.ArgumentParser(
        prog="sk-softmix", description="Softmax attention on Gaussian mixtures."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare the denoisers on a built-in task")
    compare.add_argument("--n-samples", type=int, default=20_000, help="training points")
    compare.add_argument("--n-test", type=int, default=20_000, help="test points")
    compare.add_argument("--device", default="auto", help="auto, cpu or cuda")
    compare.add_argument("--seed", type=int, default=0, help="random seed")
    compare.add_argument("--verbose", type=int, default=0, help="training progress")
    args = parser.parse_args(argv)
    if args.n_samples < 10 or args.n_test < 1:
        parser.error("--n-samples must be at least 10 and --n-test at least 1")
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))

    task = FIGURE_2
    print(
        "Figure 2 task of Gabet, Boursier & Boyer (2026): p=2, m1=(3,0), m2=(0,3), "
        f"gamma^2={task['covariance']}, xi^2={task['noise_variance']}; "
        f"{args.n_samples} training and {args.n_test} test points, device {device}.",
        flush=True,
    )
    rows = compare_denoisers(
        args.n_samples,
        args.n_test,
        device=args.device,
        random_state=args.seed,
        verbose=args.verbose,
    )
    print(format_table(rows))
    print(
        f"Population risks: Bayes {bayes_risk(**task):.4f}, "
        f"best linear {best_linear_risk(**task):.4f} "
        "(the floor of any linear-attention stack)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
