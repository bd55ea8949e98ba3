"""The comparison study behind ``python -m sk_softmix compare``."""

import csv
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from sk_softmix.study import compare_denoisers, main, run_study, summarise, write_report
from sk_softmix.study._estimators import BAYES, svc_probabilities
from sk_softmix.study._oracle import MixtureBayesClassifier
from sk_softmix.study._tasks import C1, XOR_CENTRES, xor_mixture

CLASSIFIERS = [
    "SoftmaxAttentionClassifier",
    "LinearDiscriminantAnalysis",
    "QuadraticDiscriminantAnalysis",
    "LogisticRegression",
    *svc_probabilities(),
    "KNeighborsClassifier",
    "MLPClassifier",
    "NCA + kNN",
]
DENOISERS = [
    "SoftmaxAttentionDenoiser (2 residual heads)",
    "SoftmaxAttentionDenoiser (2 residual heads, bilinear)",
    "SoftmaxAttentionDenoiser (2 plain heads)",
    "SoftmaxAttentionDenoiser (1 residual head)",
    "SoftmaxAttentionDenoiser (2 residual heads, key norm)",
    "SoftmaxAttentionDenoiser (1 plain head)",
    "LinearAttentionDenoiser",
    "GaussianMixtureDenoiser",
    "best affine map (LinearRegression)",
]
FIGURES = [
    "denoising_risk.png",
    "classification_accuracy.png",
    "digits_denoised.png",
    "clustering_transition.png",
    "training_curves.png",
]


@pytest.fixture(scope="module")
def study():
    """A reduced study: every estimator, every kind of task and every search."""
    return run_study(
        quick=True,
        device="cpu",
        n_folds=2,
        max_samples=300,
        tasks=["C1", "XOR", "breast_cancer", "figure2", "mixture16", "digits_noisy"],
        progress=False,
    )


@pytest.mark.slow
def test_report_files_hold_every_estimator_with_finite_numbers(study, tmp_path):
    written = {path.name for path in write_report(study, tmp_path)}
    assert written == {*FIGURES, "report.md", "results.csv", "results.json"}
    report = (tmp_path / "report.md").read_text()
    for name in CLASSIFIERS + DENOISERS + [BAYES]:
        assert f"| {name} |" in report
    assert not re.search(r"\b(nan|inf)\b", report)

    with (tmp_path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    folds = [row for row in rows if row["kind"] == "cross_validate"]
    # 3 classification tasks x 7-8 estimators and the SVC's ways to
    # probabilities (4 linear or QDA, 3 other nonlinear, the oracle where
    # known) and 3 denoising tasks x 9-10, 2 folds each
    svc = len(svc_probabilities())
    assert len(folds) == 2 * ((8 + svc) + (8 + svc) + (7 + svc) + 10 + 10 + 9)
    for row in folds:
        metrics = ["mse"] if row["section"] == "denoising" else ["accuracy", "log_loss"]
        assert all(math.isfinite(float(row[metric])) for metric in metrics + ["fit_seconds"])
    assert {row["device"] for row in rows} == {"cpu"}

    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["metadata"]["random_state"] == 0
    assert payload["metadata"]["versions"]["torch"] == torch.__version__
    searches = {(row["task"], row["estimator"]) for row in payload["grid_searches"]}
    assert searches == {
        ("breast_cancer", "SoftmaxAttentionClassifier"),
        ("breast_cancer", "LinearDiscriminantAnalysis"),
        ("mixture16", "SoftmaxAttentionDenoiser (2 residual heads)"),
        ("mixture16", "GaussianMixtureDenoiser"),
    }


@pytest.mark.slow
def test_known_truth_numbers_agree_with_the_estimator_tests():
    """The claims the estimators' own tests make, read off the study's tables.

    The default (full) settings on 3,000 points per task, 5 folds: 2,400
    training points per fold against 4,000-20,000 in those tests. The bounds
    sit about four standard errors of the 5-fold mean (measured fold spread
    over sqrt(5)) from the measured values, and far from the competing claim.
    """
    result = run_study(
        device="cpu", n_synthetic=3_000, tasks=["C1", "XOR", "figure2"], progress=False
    )
    summary = summarise(result)
    figure2 = summary["denoising"]["figure2"]
    ratio = {name: figure2[name]["mse_over_bayes"][0] for name in figure2}
    assert ratio[BAYES] == 1.0
    # softmax attention near Bayes (measured 1.002-1.016, standard errors
    # about 0.002); linear attention at the best linear risk, 1.55 x Bayes
    # on this task (measured 1.563 +- 0.008)
    for heads in [
        "2 plain heads",
        "2 residual heads",
        "2 residual heads, bilinear",
        "1 residual head",
    ]:
        assert ratio[f"SoftmaxAttentionDenoiser ({heads})"] < 1.05
    assert 1.45 < ratio["LinearAttentionDenoiser"] < 1.7
    assert ratio["GaussianMixtureDenoiser"] < 1.05

    classification = summary["classification"]
    c1 = classification["C1"]["SoftmaxAttentionClassifier"]
    # LDA is the Bayes rule on C1 and the attention head matches it: measured
    # -0.014 +- 0.0025 accuracy and 1.021 +- 0.005 log-loss ratio (means over
    # the 5 folds); the classifier's own tests reach 1.001-1.005 on 5,000 points
    assert abs(c1["accuracy_minus_lda"][0]) < 0.025
    assert c1["log_loss_over_bayes"][0] < 1.04
    xor = classification["XOR"]
    # selective when it must: LDA near chance, attention near Bayes (measured
    # 0.590 and 0.947 against the oracle's 0.951)
    assert xor["LinearDiscriminantAnalysis"]["accuracy"][0] < 0.7
    assert xor["SoftmaxAttentionClassifier"]["accuracy"][0] > xor[BAYES]["accuracy"][0] - 0.03


def test_digits_denoising_raises_the_psnr(study):
    digits = summarise(study)["denoising"]["digits_noisy"]
    noisy = 10 * np.log10(1 / 0.3**2)  # the input's PSNR, 10.5 dB
    # 150 training images per fold; measured 11.7-12.6 dB for the
    # Gaussian-mixture and plain-head denoisers
    assert digits["GaussianMixtureDenoiser"]["psnr"][0] > noisy + 1
    assert digits["SoftmaxAttentionDenoiser (2 plain heads)"]["psnr"][0] > noisy + 0.5


def test_every_estimator_of_a_task_sees_the_same_folds():
    result = run_study(
        quick=True, device="cpu", tasks=["C1"], n_folds=3, max_samples=90, progress=False
    )
    folds = {}
    for row in result.rows:
        folds.setdefault(row["estimator"], []).append(row["fold"])
    assert len(folds) == 8 + len(svc_probabilities())
    assert all(seen == [0, 1, 2] for seen in folds.values())
    # the folds are the seeded stratified splits, so every estimator gets them
    task = result.tasks["classification", "C1"]
    first = next(StratifiedKFold(3, shuffle=True, random_state=0).split(task.X, task.y))[1]
    np.testing.assert_array_equal(result.test_indices["classification", "C1"], first)


def test_oracle_classifier_is_the_bayes_rule():
    X, y = xor_mixture(4_000, random_state=0)
    oracle = MixtureBayesClassifier(XOR_CENTRES, {0: 0.5, 1: 0.5}).fit(X, y)
    # the posterior of class 1 written out for unit-variance clusters
    density = {
        label: np.exp(-((X[:, None] - centres[None]) ** 2).sum(axis=2) / 2).sum(axis=1)
        for label, centres in XOR_CENTRES.items()
    }
    posterior = density[1] / (density[0] + density[1])
    np.testing.assert_allclose(oracle.predict_proba(X)[:, 1], posterior, rtol=1e-10)
    # about 95.6% accuracy; 4,000 points give a standard error of 0.003
    assert abs(oracle.score(X, y) - 0.956) < 0.015

    lda = MixtureBayesClassifier({-1: C1["means"][:1], 1: C1["means"][1:]}, {-1: 0.4, 1: 0.6})
    lda.fit(np.zeros((2, 2)), [-1, 1])
    # LDA with Gamma = I: w = m_1 - m_-1, b = log(pi_+/pi_-) - (|m_1|^2 - |m_-1|^2)/2
    low, high = C1["means"]
    w, b = high - low, np.log(0.6 / 0.4) - (high @ high - low @ low) / 2
    logit = np.log(lda.predict_proba(X)[:, 1] / lda.predict_proba(X)[:, 0])
    np.testing.assert_allclose(logit, X @ w + b, rtol=1e-10, atol=1e-10)


def test_command_line_writes_the_report(tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["compare", "--quick", "--tasks", "C1", "--folds", "2", "--max-samples", "80"]
    argv += ["--device", "cpu", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert str(out / "report.md") in printed
    assert (out / "report.md").exists() and (out / "results.json").exists()
    command = json.loads((out / "results.json").read_text())["metadata"]["command"]
    assert command == "sk-softmix " + " ".join(argv)


def test_compare_denoisers_on_one_split():
    rows = compare_denoisers(n_samples=400, n_test=400, device="cpu")
    ratios = {row["method"]: row["mse_over_bayes"] for row in rows}
    assert ratios["Bayes (oracle)"] == 1.0
    assert ratios["LinearAttentionDenoiser"] > ratios["SoftmaxAttentionDenoiser (2 residual heads)"]


UNWRITABLE = "/proc/sk_softmix_report"  # no one may create directories under /proc


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--bogus"], "unrecognized arguments: --bogus"),
        (["fly"], "invalid choice: 'fly'"),
        (["compare", "--device", "tpu"], "device='tpu'"),
        (["compare", "--folds", "1"], "--folds must be at least 2"),
        (["compare", "--folds", "zero"], "expected a positive integer"),
        (["compare", "--tasks", "mnist"], "invalid choice: 'mnist'"),
        (["compare", "--n-jobs", "0"], "--n-jobs must be"),
        (["compare", "--seed", "-3"], "--seed must lie in"),
        (["compare", "--out", UNWRITABLE], "cannot write the report"),
    ]
    + ([] if torch.cuda.is_available() else [(["compare", "--device", "cuda"], "CUDA")]),
)
def test_bad_command_lines_give_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    error = captured.err.strip()
    assert "\n" not in error and "Traceback" not in error
    assert error.startswith("sk-softmix") and message in error


@pytest.mark.skipif(os.name != "posix", reason="uses a read-only directory")
def test_read_only_out_directory_is_a_usage_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that ignores permissions")
        command = [sys.executable, "-m", "sk_softmix", "compare", "--out", str(locked / "r")]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        locked.chmod(0o700)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "cannot write the report" in completed.stderr


def test_report_has_headings_only_for_the_kinds_that_ran(tmp_path):
    result = run_study(
        quick=True, device="cpu", tasks=["C1"], n_folds=2, max_samples=40, progress=False
    )
    write_report(result, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "## Classification" in report and "## Denoising" not in report


def test_interrupted_command_leaves_no_empty_report_directory(tmp_path, monkeypatch, capsys):
    import sk_softmix.study._cli as cli

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_study", interrupted)
    out = tmp_path / "report"
    assert main(["compare", "--quick", "--out", str(out)]) == 130
    assert not out.exists()
    assert "interrupted; no report written" in capsys.readouterr().err
    existing = tmp_path / "kept"
    existing.mkdir()
    assert main(["compare", "--quick", "--out", str(existing)]) == 130
    assert existing.exists()  # a directory the user made stays


def test_torch_start_up_is_paid_before_the_first_fold_is_timed():
    # torch.optim imports torch._dynamo (about 1.5 s) on the first optimiser
    code = (
        "import sys\n"
        "from sk_softmix.study._runner import _warm_up\n"
        "before = 'torch._dynamo' in sys.modules\n"
        "seconds = _warm_up('cpu')\n"
        "print(before, 'torch._dynamo' in sys.modules, seconds > 0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert out == ["False", "True", "True"]
