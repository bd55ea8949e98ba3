"""Section 11: the denoisers on real data, noisy digits, beside the baselines.

Run on its own: ``python benchmarks/noisy_digits.py``. ``load_digits`` scaled
to [0, 1] plus Gaussian pixel noise of standard deviation 0.3 and 0.5, split
70/30 (three draws of the noise and the split): PSNR on the held-out 30% and
fit time of every denoiser at its defaults, measured in this run.

- Supervised (fit on noisy/clean pairs): the best affine map (least
  squares), the default ``SoftmaxAttentionDenoiser``, and the regressors a
  practitioner would pick (k nearest neighbours, RBF kernel ridge).
- Noisy only (fit on the noisy pixels and the noise variance): the Wiener
  map, the default ``SoftmaxAttentionDenoiser`` (trained by SURE) and
  ``GaussianMixtureDenoiser`` with one component per digit, with and
  without its fallback on the Wiener map.

Then issue 29's pipeline check: 5-fold accuracy of ``LogisticRegression``
on the noisy pixels against the same after a denoiser fitted without clean
targets (as a Pipeline fits it: the labels are not its targets).
"""

import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score, train_test_split
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402

from sk_softmix import GaussianMixtureDenoiser, SoftmaxAttentionDenoiser  # noqa: E402
from sk_softmix.theory.affine_maps import best_affine_map  # noqa: E402

NOISE_STDS = (0.3, 0.5)
SEEDS = (0, 1, 2)


class AffineMap:
    """The best affine map as an estimator: least squares with clean targets,
    the Wiener map from the noise variance without them."""

    def __init__(self, noise_variance=None):
        self.noise_variance = noise_variance

    def fit(self, Z, X=None):
        self.A_, self.c_ = best_affine_map(Z, X, self.noise_variance)
        return self

    def transform(self, Z):
        return Z @ self.A_.T + self.c_


def denoisers(noise_variance):
    """name -> (estimator, supervised)."""
    return {
        "best affine map (least squares)": (AffineMap(), True),
        "SoftmaxAttentionDenoiser": (SoftmaxAttentionDenoiser(random_state=0), True),
        "KNeighborsRegressor": (KNeighborsRegressor(), True),
        "KernelRidge (RBF)": (KernelRidge(kernel="rbf"), True),
        "Wiener map (noise variance)": (AffineMap(noise_variance), False),
        "SoftmaxAttentionDenoiser (SURE)": (
            SoftmaxAttentionDenoiser(noise_variance=noise_variance, random_state=0),
            False,
        ),
        "GaussianMixtureDenoiser (10)": (
            GaussianMixtureDenoiser(10, noise_variance=noise_variance, random_state=0),
            False,
        ),
        "GaussianMixtureDenoiser (10, no fallback)": (
            GaussianMixtureDenoiser(
                10, noise_variance=noise_variance, fallback=False, random_state=0
            ),
            False,
        ),
    }


def psnr(denoised, clean):
    return 10 * np.log10(1.0 / np.mean((denoised - clean) ** 2))


def noisy_digits(noise_std, seed):
    clean = load_digits().data / 16.0
    noisy = clean + noise_std * np.random.default_rng(seed).standard_normal(clean.shape)
    return noisy, clean


def denoising_table(noise_std):
    scores, seconds = {}, {}
    for seed in SEEDS:
        noisy, clean = noisy_digits(noise_std, seed)
        Z, Z_test, X, X_test = train_test_split(noisy, clean, test_size=0.3, random_state=seed)
        for name, (estimator, supervised) in denoisers(noise_std**2).items():
            start = time.perf_counter()
            estimator.fit(Z, X) if supervised else estimator.fit(Z)
            seconds.setdefault(name, []).append(time.perf_counter() - start)
            predict = getattr(estimator, "transform", None) or estimator.predict
            scores.setdefault(name, []).append(psnr(predict(Z_test), X_test))
    affine = np.array(scores["best affine map (least squares)"])
    wiener = np.array(scores["Wiener map (noise variance)"])
    rows = []
    for name, values in scores.items():
        supervised = denoisers(1.0)[name][1]
        reference = affine if supervised else wiener
        gain = np.array(values) - reference
        rows.append(
            [
                name,
                "yes" if supervised else "no",
                f"{np.mean(values):.2f}",
                f"{gain.mean():+.2f} ({gain.min():+.2f})",
                f"{np.mean(seconds[name]):.2f}",
            ]
        )
    print_table(
        f"noisy digits, noise {noise_std}: PSNR (dB) on the held-out 30%, mean of "
        f"{len(SEEDS)} draws",
        ["denoiser", "clean y", "PSNR", "vs affine (worst)", "fit (s)"],
        rows,
    )
    return {name: np.array(values) for name, values in scores.items()}


def pipeline_table(noise_std):
    digits = load_digits()
    noisy, _ = noisy_digits(noise_std, 0)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    classifier = LogisticRegression(max_iter=2000)
    variance = noise_std**2
    steps = {
        "LogisticRegression (noisy pixels)": classifier,
        "GaussianMixtureDenoiser (2) -> LogReg": make_pipeline(
            GaussianMixtureDenoiser(noise_variance=variance, random_state=0), classifier
        ),
        "GaussianMixtureDenoiser (10) -> LogReg": make_pipeline(
            GaussianMixtureDenoiser(10, noise_variance=variance, random_state=0), classifier
        ),
        "GaussianMixtureDenoiser (10, no fallback) -> LogReg": make_pipeline(
            GaussianMixtureDenoiser(10, noise_variance=variance, fallback=False, random_state=0),
            classifier,
        ),
        "SoftmaxAttentionDenoiser (SURE) -> LogReg": make_pipeline(
            SoftmaxAttentionDenoiser(noise_variance=variance, random_state=0), classifier
        ),
    }
    rows = []
    accuracies = {}
    for name, estimator in steps.items():
        scores = cross_val_score(estimator, noisy, digits.target, cv=folds)
        accuracies[name] = scores.mean()
        rows.append([name, f"{scores.mean():.4f}", f"{scores.std(ddof=1) / np.sqrt(5):.4f}"])
    print_table(
        f"noisy digits, noise {noise_std}: 5-fold accuracy of a denoiser -> LogisticRegression",
        ["pipeline", "accuracy", "SE"],
        rows,
    )
    return accuracies


def main():
    print(f"load average at the start: {os.getloadavg()}")
    warnings.simplefilter("ignore")  # ConvergenceWarnings of the baselines
    targets = []
    for noise_std in NOISE_STDS:
        scores = denoising_table(noise_std)
        supervised = scores["SoftmaxAttentionDenoiser"] - scores["best affine map (least squares)"]
        sure = scores["SoftmaxAttentionDenoiser (SURE)"] - scores["Wiener map (noise variance)"]
        accuracies = pipeline_table(noise_std)
        plain = accuracies["LogisticRegression (noisy pixels)"]
        worst_pipeline = min(
            accuracies[name] - plain
            for name in accuracies
            if "->" in name and "no fallback" not in name
        )
        targets.append(
            [
                f"{noise_std}",
                f"{supervised.min():+.2f} >= +1",
                f"{sure.min():+.2f} >= 0",
                f"{worst_pipeline:+.4f} >= 0",
            ]
        )
    print_table(
        "targets (issue 29), worst draw: supervised default - best affine map (dB); SURE "
        "default - Wiener map (dB); denoiser -> LogReg - LogReg on noisy pixels",
        ["noise", "supervised", "SURE", "pipelines"],
        targets,
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
