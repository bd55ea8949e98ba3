"""The study's PNG figures (needs matplotlib, the ``plot`` extra).

Risk bars with error bars, noisy and denoised digits per method, the
clustering transition of the iterated denoiser, and training curves.
"""

from pathlib import Path

import numpy as np

from ..denoising._bayes import BayesDenoiser
from ..theory.dynamics import plot_trajectories
from ._estimators import BAYES
from ._summary import summarise


def make_figures(result, out: Path) -> list[Path]:
    """Draw every figure the result has data for; none without matplotlib.

    Returns the paths written. When matplotlib is missing, the reason is
    recorded in ``result.metadata["figures_skipped"]`` for the report.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError:
        result.metadata["figures_skipped"] = (
            "matplotlib is not installed (pip install 'sk_softmix[plot]')."
        )
        return []
    written = []
    for name, draw in [
        ("denoising_risk.png", _denoising_bars),
        ("classification_accuracy.png", _classification_bars),
        ("digits_denoised.png", _digits_grid),
        ("clustering_transition.png", _clustering_transition),
        ("training_curves.png", _training_curves),
    ]:
        figure = draw(result, plt)
        if figure is None:
            continue
        figure.tight_layout()
        figure.savefig(out / name, dpi=110)
        plt.close(figure)
        written.append(out / name)
    return written


def _colour(name: str) -> str:
    """Softmax attention in orange, the oracle in grey, every baseline in blue."""
    if "Softmax" in name:
        return "tab:orange"
    return "tab:grey" if name == BAYES else "tab:blue"


def _bars(ax, estimators: dict, metric: str):
    names = [name for name, metrics in estimators.items() if metric in metrics]
    means = [estimators[name][metric][0] for name in names]
    stds = [estimators[name][metric][1] for name in names]
    positions = np.arange(len(names))
    ax.barh(positions, means, xerr=stds, color=[_colour(name) for name in names], capsize=3)
    ax.set_yticks(positions, [name.replace("SoftmaxAttention", "SoftmaxAttn ") for name in names])
    ax.invert_yaxis()


def _denoising_bars(result, plt):
    tasks = summarise(result).get("denoising", {})
    panels = [
        (task, "mse_over_bayes" if "mse_over_bayes" in next(iter(est.values())) else "psnr", est)
        for task, est in tasks.items()
    ]
    if not panels:
        return None
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), squeeze=False)
    for ax, (task, metric, estimators) in zip(axes[:, 0], panels, strict=True):
        _bars(ax, estimators, metric)
        if metric == "mse_over_bayes":
            ax.axvline(1.0, color="k", lw=0.8)
            ax.set_xlabel("test MSE / Bayes MSE (mean +- std over folds)")
        else:
            ax.set_xlabel("PSNR in dB (higher is better)")
        ax.set_title(f"denoising: {task}")
    return figure


def _classification_bars(result, plt):
    tasks = summarise(result).get("classification", {})
    if not tasks:
        return None
    columns = min(len(tasks), 4)
    rows = -(-len(tasks) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    for ax, (task, estimators) in zip(axes.flat, tasks.items(), strict=False):
        _bars(ax, estimators, "accuracy")
        ax.set_title(task)
        ax.set_xlabel("accuracy")
        low = min(metrics["accuracy"][0] for metrics in estimators.values())
        ax.set_xlim(max(0.0, low - 0.1), 1.0)
    for ax in axes.flat[len(tasks) :]:
        ax.axis("off")
    return figure


def _digits_grid(result, plt):
    key = ("denoising", "digits_noisy")
    if key not in result.tasks:
        return None
    task, test = result.tasks[key], result.test_indices[key][:8]
    methods = {
        name: fitted
        for (section, task_name, name), fitted in result.fitted.items()
        if (section, task_name) == key
    }
    rows = [("clean", task.y[test]), ("noisy", task.X[test])]
    rows += [(name, fitted.predict(task.X[test])) for name, fitted in methods.items()]
    figure, axes = plt.subplots(len(rows), len(test), figsize=(1.1 * len(test), 1.2 * len(rows)))
    for (label, images), row in zip(rows, np.atleast_2d(axes), strict=True):
        for image, ax in zip(images, row, strict=True):
            ax.imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(
            label.replace("SoftmaxAttentionDenoiser", "softmax"),
            rotation=0,
            ha="right",
            va="center",
            fontsize=7,
        )
    figure.suptitle("digits: first test fold, clean / noisy / denoised by each method")
    return figure


def _clustering_transition(result, plt):
    """Figure 3 of the paper, with the Bayes denoiser: collapse when lambda <= 1."""
    starts = np.random.default_rng(result.metadata.get("random_state", 0)).normal(size=(30, 2))
    figure, axes = plt.subplots(1, 2, figsize=(9, 4.4))
    for ax, lam in zip(axes, (0.8, 1.5), strict=True):
        # two point masses at distance 2 lambda, unit noise: separation lambda
        means = np.array([[lam * 0.6, lam * 0.8], [-lam * 0.6, -lam * 0.8]])
        mixture = {"means": means, "covariance": 0.0, "noise_variance": 1.0}
        oracle = BayesDenoiser(**mixture).fit(np.zeros((1, 2)))
        plot_trajectories(oracle, 2 * starts, 50, ax=ax, resolution=80, **mixture)
        ax.set_title(f"iterated Bayes denoiser, lambda = {lam}")
    return figure


def _training_curves(result, plt):
    curves = {}
    for (section, task, name), fitted in result.fitted.items():
        estimator = fitted.steps[-1][1] if hasattr(fitted, "steps") else fitted
        history = getattr(estimator, "history_", None)
        if isinstance(history, dict):
            history = history.get("loss")
        if history is not None and len(history) > 1 and "Softmax" in name:
            curves.setdefault(section, []).append((f"{task}: {name}", np.asarray(history)))
    if not curves:
        return None
    figure, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4), squeeze=False)
    for ax, (section, entries) in zip(axes[0], curves.items(), strict=True):
        for label, history in entries:
            ax.plot(np.arange(1, len(history) + 1), history, lw=1, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel("training loss (minibatch)")
        ax.set_title(f"{section}: first fold")
        ax.legend(fontsize=6, loc="upper right", framealpha=0.6)
    return figure
