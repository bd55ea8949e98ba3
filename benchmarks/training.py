"""Section 3, training: fit speed and time to 1% excess risk, classifier fit next to LDA.

- SoftmaxAttentionDenoiser on the paper's Figure 2 task (20,000 noisy points
  with clean targets, default settings otherwise): Adam iterations per second
  (``(t(max_iter=k) - t(max_iter=0)) / k``, so the closed-form start is not
  counted as iterations), and for a grid of ``max_iter`` the fit seconds and
  MSE / Bayes MSE on fresh test points; "seconds to 1%" is the fit time of the
  first grid point with MSE / Bayes - 1 <= 0.01 (an upper bound at the grid's
  resolution).
- SoftmaxAttentionClassifier.fit on the paper's C2 configuration (d = 20,
  means -e1 and +e1, prior 0.5) next to LinearDiscriminantAnalysis.fit.
"""

import numpy as np
from common import FIGURE2, best_of, excess_ratio, figure2_test_set, print_table, timed
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture, make_lda

TARGET_EXCESS = 0.01


def denoiser_fit(quick, device):
    n_train = 20_000
    grid = [0, 200] if quick else [0, 25, 50, 100, 150, 200, 300]
    Z, X, _ = make_gaussian_mixture(n_train, **FIGURE2, random_state=0)
    Z_test, X_test, bayes = figure2_test_set(10_000)
    rows = []
    for max_iter in grid:
        denoiser = SoftmaxAttentionDenoiser(max_iter=max_iter, device=device, random_state=0)
        _, seconds = timed(lambda d=denoiser: d.fit(Z, X), device)
        ratio = excess_ratio(denoiser.transform(Z_test), X_test, bayes)
        rows.append({"max_iter": max_iter, "fit_seconds": seconds, "mse_over_bayes": ratio})
    start = rows[0]["fit_seconds"]
    for row in rows[1:]:
        row["iterations_per_second"] = row["max_iter"] / max(row["fit_seconds"] - start, 1e-9)
    reached = [r for r in rows if r["mse_over_bayes"] - 1 <= TARGET_EXCESS]
    seconds_to_target = reached[0]["fit_seconds"] if reached else None
    print_table(
        f"3a. SoftmaxAttentionDenoiser.fit, Figure 2 task, {n_train:,} points ({device})",
        [
            "max_iter",
            "fit seconds",
            "Adam it/s",
            "excess risk % (MSE / Bayes - 1, 10,000 test points)",
        ],
        [
            [
                r["max_iter"],
                r["fit_seconds"],
                r.get("iterations_per_second"),
                100 * (r["mse_over_bayes"] - 1),
            ]
            for r in rows
        ],
    )
    shown = "not reached" if seconds_to_target is None else f"{seconds_to_target:.2f}"
    print(f"seconds of fit to reach 1% excess risk: {shown}")
    return {"rows": rows, "seconds_to_1pct": seconds_to_target, "n_train": n_train}


def classifier_fit(quick, device):
    n = 1_000 if quick else 5_000
    means = np.zeros((2, 20))
    means[0, 0], means[1, 0] = -1.0, 1.0
    X, y = make_lda(n, means, prior=0.5, random_state=0)
    X_test, y_test = make_lda(20_000, means, prior=0.5, random_state=1)
    ours = SoftmaxAttentionClassifier(device=device, random_state=0)
    lda = LinearDiscriminantAnalysis()
    _, ours_seconds = timed(lambda: ours.fit(X, y), device)
    lda_seconds = best_of(lambda: lda.fit(X, y), 3)
    row = {
        "config": "C2",
        "n_train": n,
        "fit_seconds": ours_seconds,
        "lda_fit_seconds": lda_seconds,
        "ratio_to_lda": ours_seconds / lda_seconds,
        "accuracy": float(ours.score(X_test, y_test)),
        "lda_accuracy": float(lda.score(X_test, y_test)),
    }
    print_table(
        f"3b. SoftmaxAttentionClassifier.fit, C2 (d = 20), {n:,} points ({device})",
        [
            "config",
            "fit s (ours)",
            "fit s (LDA)",
            "ours / LDA",
            "accuracy (ours)",
            "accuracy (LDA)",
        ],
        [
            [
                "C2",
                row["fit_seconds"],
                row["lda_fit_seconds"],
                row["ratio_to_lda"],
                row["accuracy"],
                row["lda_accuracy"],
            ]
        ],
    )
    return row


def run(quick, device):
    return {"denoiser": denoiser_fit(quick, device), "classifier": classifier_fit(quick, device)}
