"""The comparison study behind ``python -m sk_softmix compare``."""

import numpy as np
import pytest
import torch

from sk_softmix.study import main


def test_compare_prints_every_method_with_finite_numbers(capsys):
    assert main(["compare", "--n-samples", "400", "--n-test", "400", "--device", "cpu"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    methods = [row.split("|")[1].strip() for row in rows[1:]]
    assert methods == [
        "SoftmaxAttentionDenoiser (2 residual heads)",
        "SoftmaxAttentionDenoiser (2 plain heads)",
        "SoftmaxAttentionDenoiser (1 plain head)",
        "LinearAttentionDenoiser",
        "GaussianMixtureDenoiser",
        "BayesDenoiser (oracle)",
    ]
    ratios = {
        method: float(row.split("|")[3]) for method, row in zip(methods, rows[1:], strict=True)
    }
    assert all(np.isfinite(list(ratios.values())))
    assert ratios["BayesDenoiser (oracle)"] == 1.0
    # even on 400 points linear attention is far above the softmax denoiser
    assert ratios["LinearAttentionDenoiser"] > ratios["SoftmaxAttentionDenoiser (2 residual heads)"]


@pytest.mark.parametrize(
    "argv",
    [["compare", "--n-samples", "3"], ["compare", "--device", "tpu"], ["fly"]]
    + ([] if torch.cuda.is_available() else [["compare", "--device", "cuda"]]),
)
def test_bad_command_lines_exit_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
