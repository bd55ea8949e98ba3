"""Section 10: the default classifier on real data, beside the baselines practitioners pick.

Run on its own: ``python benchmarks/real_data.py``. Five-fold stratified
cross-validation (the same folds for every estimator), each estimator after
a ``StandardScaler`` at its defaults: accuracy, log-loss, the per-fold
accuracy difference to LDA with its standard error, and the mean fit time
of every estimator measured in this run. The last table holds issue 29's
targets, the digits fit time as a ratio to the slower of the RBF SVC and
NCA + kNN measured here. ``lfw_subset`` needs scikit-image (the ``image``
extra) and is skipped without it.
"""

import os
import sys

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402

from sk_softmix import SoftmaxAttentionClassifier  # noqa: E402


def separated_clusters(n=1500, n_classes=3, per_class=4, d=6, random_state=0):
    """Each class a mixture of ``per_class`` unit Gaussians at random centres (std 4)."""
    rng = np.random.default_rng(random_state)
    centres = rng.normal(size=(n_classes * per_class, d)) * 4
    component = rng.integers(len(centres), size=n)
    return centres[component] + rng.normal(size=(n, d)), component // per_class


def lfw_subset():
    from skimage.data import lfw_subset as faces

    images = faces()  # 100 faces then 100 non-faces, 25 x 25 pixels
    return images.reshape(len(images), -1), np.r_[np.ones(100, int), np.zeros(100, int)]


def data_sets():
    sets = {
        "iris": load_iris(return_X_y=True),
        "wine": load_wine(return_X_y=True),
        "breast cancer": load_breast_cancer(return_X_y=True),
        "digits": load_digits(return_X_y=True),
        "4 clusters x 3 classes": separated_clusters(),
    }
    try:
        sets["lfw_subset (p > n)"] = lfw_subset()
    except ImportError:
        print("scikit-image not installed: lfw_subset skipped")
    return sets


def estimators():
    return {
        "SoftmaxAttentionClassifier": SoftmaxAttentionClassifier(device="cpu", random_state=0),
        "LinearDiscriminantAnalysis": LinearDiscriminantAnalysis(),
        "LogisticRegression": LogisticRegression(max_iter=2000),
        "SVC (RBF, Platt)": CalibratedClassifierCV(SVC(), ensemble=False),
        "KNeighborsClassifier": KNeighborsClassifier(),
        "NCA + kNN": make_pipeline(
            NeighborhoodComponentsAnalysis(random_state=0), KNeighborsClassifier()
        ),
    }


def main():
    print(f"load average at the start: {os.getloadavg()}")
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    targets, fit_seconds = [], {}
    for data_name, (X, y) in data_sets().items():
        splits = list(folds.split(X, y))
        results = {}
        for name, estimator in estimators().items():
            scores = cross_validate(
                make_pipeline(StandardScaler(), estimator),
                X,
                y,
                cv=splits,
                scoring=["accuracy", "neg_log_loss"],
                return_estimator=name == "SoftmaxAttentionClassifier",
            )
            results[name] = scores
        lda = results["LinearDiscriminantAnalysis"]["test_accuracy"]
        rows = []
        for name, scores in results.items():
            difference = scores["test_accuracy"] - lda
            rows.append(
                [
                    name,
                    f"{scores['test_accuracy'].mean():.4f}",
                    f"{-scores['test_neg_log_loss'].mean():.4f}",
                    f"{difference.mean():+.4f} +- {difference.std(ddof=1) / np.sqrt(5):.4f}",
                    f"{scores['fit_time'].mean():.3f}",
                ]
            )
        fitted = results["SoftmaxAttentionClassifier"]["estimator"]
        kept = ", ".join(f"{m[-1].init_}/{m[-1].linear_start_}" for m in fitted)
        print_table(
            f"{data_name} ({X.shape[0]} x {X.shape[1]}); attention kept: {kept}",
            ["estimator", "accuracy", "log-loss", "accuracy - LDA (SE)", "fit (s)"],
            rows,
        )
        ours = results["SoftmaxAttentionClassifier"]
        difference = ours["test_accuracy"] - lda
        linear_loss = min(
            -results[name]["test_neg_log_loss"].mean()
            for name in ("LinearDiscriminantAnalysis", "LogisticRegression")
        )
        targets.append(
            [
                data_name,
                f"{difference.mean():+.4f} >= -{difference.std(ddof=1) / np.sqrt(5):.4f}",
                f"{-ours['test_neg_log_loss'].mean() / linear_loss:.2f} <= 1.10",
            ]
        )
        fit_seconds[data_name] = {name: s["fit_time"].mean() for name, s in results.items()}
    print_table(
        "targets (issue 29): accuracy - LDA >= -1 SE; log-loss / min(LDA, LogReg)",
        ["data", "accuracy - LDA", "log-loss ratio"],
        targets,
    )
    digits = fit_seconds["digits"]
    slower = max(digits["SVC (RBF, Platt)"], digits["NCA + kNN"])
    print(
        f"digits fit: attention {digits['SoftmaxAttentionClassifier']:.3f} s, slower of "
        f"SVC and NCA + kNN {slower:.3f} s, ratio "
        f"{digits['SoftmaxAttentionClassifier'] / slower:.2f} (target <= 3)"
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
