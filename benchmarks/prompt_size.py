"""Section 5, risk against prompt size on the Figure 2 task (table and PNG).

SoftmaxAttentionDenoiser fitted on 20,000 noisy points with clean targets,
``prompt_size`` from 100 to all of them, default settings otherwise
(``max_iter=100`` with --quick); MSE / Bayes MSE on 10,000 fresh test points.
The figure is skipped when matplotlib is missing.
"""

from common import FIGURE2, excess_ratio, figure2_test_set, print_table, timed

from sk_softmix import SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture


def run(quick, device, figure_path=None):
    n_train = 20_000
    sizes = [100, 300, 1_000, 3_000, 10_000, None]
    max_iter = 100 if quick else 200
    Z, X, _ = make_gaussian_mixture(n_train, **FIGURE2, random_state=0)
    Z_test, X_test, bayes = figure2_test_set(10_000)
    rows = []
    for size in sizes:
        denoiser = SoftmaxAttentionDenoiser(
            prompt_size=size, max_iter=max_iter, device=device, random_state=0
        )
        _, seconds = timed(lambda d=denoiser: d.fit(Z, X), device)
        ratio = excess_ratio(denoiser.transform(Z_test), X_test, bayes)
        rows.append(
            {"prompt_size": size or n_train, "fit_seconds": seconds, "mse_over_bayes": ratio}
        )
    print_table(
        f"5. Risk against prompt size, Figure 2 task, max_iter={max_iter} ({device})",
        ["prompt_size", "fit seconds", "MSE / Bayes"],
        [[r["prompt_size"], r["fit_seconds"], r["mse_over_bayes"]] for r in rows],
    )
    saved = None
    if figure_path:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib missing: no figure")
        else:
            figure, axes = plt.subplots(figsize=(5, 3.5))
            axes.semilogx(
                [r["prompt_size"] for r in rows], [r["mse_over_bayes"] for r in rows], "o-"
            )
            axes.axhline(1.0, color="grey", linestyle="--", label="Bayes")
            axes.set_xlabel("prompt_size (tokens)")
            axes.set_ylabel("test MSE / Bayes MSE")
            axes.set_title(f"Figure 2 task, {n_train:,} training points")
            axes.legend()
            figure.tight_layout()
            figure.savefig(figure_path, dpi=120)
            plt.close(figure)
            saved = str(figure_path)
            print(f"figure: {saved}")
    return {"rows": rows, "max_iter": max_iter, "figure": saved}
