"""The scikit-learn estimator contract, for every estimator of the package.

The check suite fits with ``y`` set to 1-D class labels. A denoiser's clean
targets have ``X``'s shape; any other ``y`` is a later step's target (a
Pipeline's labels) that the denoiser ignores, as scikit-learn transformers
do, training by Stein's unbiased risk estimate from ``noise_variance``. So
the attention denoisers run the suite with ``noise_variance`` given, and
``score`` without clean targets is minus that estimate. The supervised path
is covered with properly shaped targets in ``test_sklearn_integration.py``.
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)

# BayesDenoiser runs the suite with its default mixture, one component at
# the origin in X's dimension; a mixture given with means fixes the
# dimension, and its behaviour on other dimensions (a ValueError that leaves
# the estimator unchanged) is tested in test_baselines.py.

# fit_transform leaves each training point out of its own prompt, as
# training does, so that a Pipeline denoises training points the way it will
# denoise test points; fit(X).transform(X) lets each point attend to its own
# copy. The checks demand that the two agree.
LEAVE_ONE_OUT = (
    "fit_transform leaves each point out of its own prompt (as training does); "
    "fit(X).transform(X) lets it attend to itself, by design"
)
ATTENTION_EXPECTED_FAILURES = dict.fromkeys(
    [
        "check_transformer_general",
        "check_transformer_general(readonly_memmap=True)",
        "check_transformer_data_not_an_array",
    ],
    LEAVE_ONE_OUT,
)


# The classifier weighs the tokens of its kernel heads (a key bias log w_i);
# the paper's bilinear heads, trained by a solver, take no weights and say so
# with a ValueError for unequal ones, which these checks pass.
UNWEIGHTED = (
    "bilinear heads take no sample_weight or class_weight: unequal weights raise a "
    "ValueError that names the kernel heads"
)
BILINEAR_EXPECTED_FAILURES = dict.fromkeys(
    [
        "check_sample_weights_not_overwritten",
        "check_sample_weight_equivalence_on_dense_data",
        "check_classifiers_one_label_sample_weights",
        "check_class_weight_classifiers",
    ],
    UNWEIGHTED,
)


def expected_failures(estimator):
    """The bilinear classifier fails the checks of unequal sample weights.
    The leave-one-out checks fail wherever the fitted model attends to its
    prompt: linear-attention stacks, one plain softmax head (it has no
    affine start to fall back on) and heads kept without validation
    (``early_stopping=False``). The default softmax denoiser keeps the
    affine map on the checks' data, where its heads do not beat it on held-out
    points, and passes them: listing them there would be a reason that does
    not hold."""
    if isinstance(estimator, LinearAttentionDenoiser):
        return ATTENTION_EXPECTED_FAILURES
    if isinstance(estimator, SoftmaxAttentionClassifier) and estimator.init not in ("auto", "lda"):
        return BILINEAR_EXPECTED_FAILURES
    if isinstance(estimator, SoftmaxAttentionDenoiser) and (
        estimator.early_stopping is False or not (estimator.residual or estimator.n_heads >= 2)
    ):
        return ATTENTION_EXPECTED_FAILURES
    return {}


@parametrize_with_checks(
    [
        SoftmaxAttentionDenoiser(noise_variance=0.01, max_iter=5, random_state=0),
        SoftmaxAttentionDenoiser(
            n_heads=1, residual=False, noise_variance=0.01, max_iter=5, random_state=0
        ),
        SoftmaxAttentionDenoiser(
            key_bias="norm", early_stopping=False, noise_variance=0.01, max_iter=5, random_state=0
        ),
        LinearAttentionDenoiser(noise_variance=0.01, max_iter=5, random_state=0),
        LinearAttentionDenoiser(
            n_layers=2, residual=False, noise_variance=0.01, max_iter=5, random_state=0
        ),
        GaussianMixtureDenoiser(noise_variance=0.01, random_state=0),
        BayesDenoiser(covariance=2.0, noise_variance=0.5),
        SoftmaxAttentionClassifier(random_state=0),
        SoftmaxAttentionClassifier(
            n_heads=2, init="bayes", solver="gd", max_iter=5, random_state=0
        ),
    ],
    expected_failed_checks=expected_failures,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
