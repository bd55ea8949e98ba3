"""Section 9, mixtures of unequal norms: the key-bias denoisers against Bayes.

Three and four components with means of norms 0, 5, 7 (and 8.5), shared
covariance ``Gamma = I``, noise variance 1, in the plane (p = 2) and
rotated into p = 8 (the same means on a random plane). The four means are
not on one circle, and one is inside the triangle of the others: no single
key-bias head is the Bayes denoiser there (user guide, "Key-bias heads").
Each denoiser is fitted on ``n`` noisy points with their clean
counterparts, at its default settings but for ``key_bias``, and scored on
``n`` fresh test points against the Bayes denoiser on the same points.
"""

import numpy as np
from common import print_table, timed

from sk_softmix import BayesDenoiser, GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture

KEY_NORM = "key norm (2 residual heads)"
DOT_PRODUCT = "dot product (2 residual heads)"


def mixtures() -> dict:
    """Name -> means of each mixture of the section."""
    three = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 7.0]])
    four = np.vstack([three, [[-6.0, -6.0]]])
    rotation = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 8)))[0]

    def rotated(means):
        return np.hstack([means, np.zeros((len(means), 6))]) @ rotation.T

    return {
        "K=3, p=2": three,
        "K=4, p=2": four,
        "K=3, p=8": rotated(three),
        "K=4, p=8": rotated(four),
    }


def run(quick, device):
    n = 5_000 if quick else 20_000
    rows = []
    for name, means in mixtures().items():
        task = {"means": means, "covariance": 1.0, "noise_variance": 1.0}
        Z, X, _ = make_gaussian_mixture(2 * n, **task, random_state=1)
        Z_train, X_train, Z_test, X_test = Z[:n], X[:n], Z[n:], X[n:]
        bayes = BayesDenoiser(**task).fit(Z_train).transform(Z_test)
        bayes_risk = np.mean((bayes - X_test) ** 2)
        attention = {"n_components": len(means), "device": device, "random_state": 0}
        denoisers = {
            DOT_PRODUCT: SoftmaxAttentionDenoiser(2, **attention),
            "key offset (2 residual heads)": SoftmaxAttentionDenoiser(
                2, key_bias="offset", **attention
            ),
            KEY_NORM: SoftmaxAttentionDenoiser(2, key_bias="norm", **attention),
            "GaussianMixtureDenoiser": GaussianMixtureDenoiser(
                len(means), noise_variance=1.0, random_state=0
            ),
        }
        for method, denoiser in denoisers.items():
            _, seconds = timed(lambda d=denoiser, z=Z_train, x=X_train: d.fit(z, x), device)
            risk = np.mean((denoiser.transform(Z_test) - X_test) ** 2)
            rows.append(
                {
                    "mixture": name,
                    "method": method,
                    "ratio": float(risk / bayes_risk),
                    "fit_seconds": float(seconds),
                }
            )
    print_table(
        f"9. Mixtures of unequal norms, {n:,} training and {n:,} test points ({device})",
        ["mixture", "method", "MSE / Bayes", "fit seconds"],
        # three decimals: the ratios that matter differ in the second
        [[r["mixture"], r["method"], f"{r['ratio']:.3f}", r["fit_seconds"]] for r in rows],
    )
    return {"n": n, "rows": rows}
