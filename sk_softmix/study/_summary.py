"""The study's numbers from its rows: scores relative to each task's
reference, and means and standard deviations over folds. Both the report and
the figures read them."""

import json

import numpy as np

from ._estimators import BAYES

LDA = "LinearDiscriminantAnalysis"


def add_relative_scores(result) -> None:
    """Add per-fold scores relative to the task's reference to every row.

    Denoising: ``mse_over_bayes`` against the oracle on the same fold, and
    ``psnr = 10 log10(peak^2 / mse)`` for images. Classification:
    ``accuracy_minus_lda`` against LDA, ``log_loss_over_bayes`` against the
    oracle. Both references are scored on the same folds as every other
    estimator of the task, so the ratios pair like with like.
    """
    reference = {}
    for row in result.rows:
        if row["estimator"] in (BAYES, LDA):
            reference[row["section"], row["task"], row["estimator"], row["fold"]] = row
    for row in result.rows:
        key = row["section"], row["task"]
        bayes = reference.get((*key, BAYES, row["fold"]))
        if row["section"] == "denoising":
            if bayes is not None:
                row["mse_over_bayes"] = row["mse"] / bayes["mse"]
            peak = result.tasks[key].peak
            if peak is not None:
                row["psnr"] = 10 * np.log10(peak**2 / row["mse"])
        else:
            lda = reference.get((*key, LDA, row["fold"]))
            if lda is not None:
                row["accuracy_minus_lda"] = row["accuracy"] - lda["accuracy"]
            if bayes is not None:
                row["log_loss_over_bayes"] = row["log_loss"] / bayes["log_loss"]


def summarise(result) -> dict:
    """Mean and standard deviation over folds of every number of every row.

    Parameters
    ----------
    result : StudyResult
        The output of :func:`run_study`.

    Returns
    -------
    dict
        ``section -> task -> estimator -> metric -> (mean, std)``, in the
        order the study ran them.

    Examples
    --------
    >>> from sk_softmix.study import run_study, summarise
    >>> result = run_study(quick=True, device="cpu", tasks=["C1"], n_folds=2,
    ...                    max_samples=100, progress=False)
    >>> summarise(result)["classification"]["C1"]["Bayes (oracle)"]["log_loss_over_bayes"]
    (1.0, 0.0)
    """
    grouped: dict = {}
    for row in result.rows:
        metrics = grouped.setdefault(row["section"], {}).setdefault(row["task"], {})
        for metric, value in row.items():
            if isinstance(value, float):
                metrics.setdefault(row["estimator"], {}).setdefault(metric, []).append(value)
    return {
        section: {
            task: {
                estimator: {
                    metric: (float(np.mean(values)), float(np.std(values)))
                    for metric, values in metrics.items()
                }
                for estimator, metrics in estimators.items()
            }
            for task, estimators in tasks.items()
        }
        for section, tasks in grouped.items()
    }


def search_summary(result) -> list[dict]:
    """One entry per grid-search candidate: parameters, mean and std score, rank."""
    candidates: dict = {}
    for row in result.searches:
        key = (row["task"], row["estimator"], json.dumps(row["params"], sort_keys=True))
        entry = candidates.setdefault(key, {**row, "scores": []})
        entry["scores"].append(row["score"])
    return [
        {
            "task": entry["task"],
            "estimator": entry["estimator"],
            "params": entry["params"],
            "scoring": entry["scoring"],
            "mean_score": float(np.mean(entry["scores"])),
            "std_score": float(np.std(entry["scores"])),
            "rank": entry["rank"],
            "fit_seconds": entry["fit_seconds"],
        }
        for entry in candidates.values()
    ]
