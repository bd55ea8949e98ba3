"""Section 4, in-context denoising against refitting on a new task.

A SoftmaxAttentionDenoiser trained on the Figure 2 task (means (3, 0) and
(0, 3)) denoises a new task (means (-3, 0) and (0, -3): equal norms, where
the in-context construction is exact in the large-prompt limit) by attending
over the new task's prompt, ``transform(queries, prompt=new_prompt)``; the
reference refits GaussianMixtureDenoiser (EM) on that prompt, then denoises.
Both: seconds (refit: fit + transform) and MSE / Bayes MSE on 5,000 fresh
queries of the new task.
"""

import numpy as np
from common import FIGURE2, excess_ratio, figure2_test_set, print_table, timed

from sk_softmix import GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture

NEW_MEANS = np.array([[-3.0, 0.0], [0.0, -3.0]])


def run(quick, device):
    lengths = [1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    Z, X, _ = make_gaussian_mixture(5_000, **FIGURE2, random_state=0)
    trained = SoftmaxAttentionDenoiser(max_iter=50, device=device, random_state=0).fit(Z, X)
    queries, clean, bayes = figure2_test_set(5_000, means=NEW_MEANS, random_state=7)
    rows = []
    for length in lengths:
        prompt, _, _ = make_gaussian_mixture(
            length, NEW_MEANS, covariance=1.0, noise_variance=4.0, random_state=length
        )
        ours, ours_seconds = timed(lambda p=prompt: trained.transform(queries, prompt=p), device)

        def refit(p=prompt):
            gmm = GaussianMixtureDenoiser(noise_variance=4.0, random_state=0).fit(p)
            return gmm.transform(queries)

        theirs, refit_seconds = timed(refit)
        rows.append(
            {
                "prompt_length": length,
                "in_context_seconds": ours_seconds,
                "refit_seconds": refit_seconds,
                "speed_ratio": refit_seconds / ours_seconds,
                "in_context_mse_over_bayes": excess_ratio(ours, clean, bayes),
                "refit_mse_over_bayes": excess_ratio(theirs, clean, bayes),
            }
        )
    print_table(
        f"4. New task: in context vs refitting EM, 5,000 queries ({device})",
        [
            "prompt tokens",
            "in-context s",
            "refit EM s",
            "refit s / in-context s",
            "in-context MSE / Bayes",
            "refit MSE / Bayes",
        ],
        [
            [
                r["prompt_length"],
                r["in_context_seconds"],
                r["refit_seconds"],
                r["speed_ratio"],
                r["in_context_mse_over_bayes"],
                r["refit_mse_over_bayes"],
            ]
            for r in rows
        ],
    )
    return {"rows": rows}
