"""The fit every trained estimator shares (``training._sequence``), alone and
through the estimators: hold out, start, train, fall back on the untrained
linear start, refit it on every row, and warn only where the fallback was
not the estimator's own choice."""

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.training._sequence import SequencePlan, fit_with_linear_fallback


def _plan(**changes):
    plan = {
        "estimator": "Toy",
        "init": "auto",
        "start_names": ("bayes",),
        "reference": "linear",
        "by_default": True,
        "max_iter": 10,
        "early_stopping": "auto",
        "validation_fraction": 0.2,
        "prompt_size": None,
    }
    plan.update(changes)
    return SequencePlan(**plan)


class _Recorder:
    """Callables for the sequence that record what they were given: a start's
    parameters are the rows it was built on, and training keeps ``keep``."""

    def __init__(self, keep):
        self.keep, self.builds, self.trained = keep, [], None

    def choose_prompt(self, rows, random_state):
        return rows

    def build_starts(self, rows, prompt_indices, names, seed):
        names = ("bayes",) if names is None else names
        self.builds.append((tuple(names), len(rows), len(prompt_indices)))
        return {name: {"rows": np.array(rows)} for name in names}

    def train(self, starts, reference, prompt_indices, validation_rows):
        self.trained = (tuple(starts), reference[0] if reference else None, len(validation_rows))
        trained = self.keep != "linear"
        name = self.keep if trained else reference[0]
        parameters = starts[name] if trained else reference[1]
        outcome = SimpleNamespace(start=name, parameters=parameters, trained=trained, n_iter=7)
        return outcome, "history"

    def run(self, plan, n_samples=50):
        return fit_with_linear_fallback(
            n_samples,
            plan,
            np.random.RandomState(0),
            choose_prompt=self.choose_prompt,
            build_starts=self.build_starts,
            train=self.train,
            empty_history="none",
        )


def test_a_trained_start_keeps_its_training_rows_and_prompt():
    recorder = _Recorder(keep="bayes")
    outcome = recorder.run(_plan())
    # 10 of 50 rows held out; the reference is built beside the trained start
    assert recorder.trained == (("bayes",), "linear", 10)
    assert outcome.start == "bayes" and outcome.n_iter == 7 and outcome.history == "history"
    assert len(outcome.parameters["rows"]) == 40 and len(outcome.prompt_indices) == 40


def test_a_kept_linear_start_is_built_again_on_every_row():
    recorder = _Recorder(keep="linear")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # by default: a silent choice
        outcome = recorder.run(_plan())
    assert outcome.start == "linear"
    assert len(outcome.parameters["rows"]) == 50 and len(outcome.prompt_indices) == 50
    assert recorder.builds[-1] == (("linear",), 50, 50)


def test_falling_back_from_an_asked_start_warns():
    recorder = _Recorder(keep="linear")
    with pytest.warns(UserWarning, match="trained from init='bayes'.*init_='linear'"):
        recorder.run(_plan(init="bayes", by_default=False))


def test_a_start_without_a_reference_never_warns_of_one():
    recorder = _Recorder(keep="bayes")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = recorder.run(_plan(init="bayes", reference=None, by_default=False))
    assert recorder.trained[1] is None and outcome.start == "bayes"


@pytest.mark.parametrize("plan", [_plan(max_iter=0), _plan(early_stopping=False, max_iter=0)])
def test_no_training_keeps_the_untrained_linear_start(plan):
    recorder = _Recorder(keep="bayes")
    outcome = recorder.run(plan)
    assert recorder.trained is None and outcome.start == "linear"
    assert outcome.history == "none" and outcome.n_iter == 0
    assert len(outcome.parameters["rows"]) == 50  # nothing held out


def test_too_few_rows_to_hold_out_keep_the_linear_start_untrained():
    recorder = _Recorder(keep="bayes")
    outcome = recorder.run(_plan(), n_samples=4)
    assert recorder.trained is None and outcome.start == "linear"


def test_the_denoiser_trained_from_its_linear_start_does_not_warn_of_losing_to_it():
    # init="linear" trains the linear start itself: there is no untrained
    # reference to lose to (this warned, wrongly, before the shared sequence)
    sample = make_gaussian_mixture(
        300, [[-2.0, 0.0], [2.0, 0.0]], noise_variance=0.25, random_state=0
    )
    Z = sample.noisy
    denoiser = SoftmaxAttentionDenoiser(init="linear", noise_variance=0.25, max_iter=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        denoiser.set_params(random_state=0).fit(Z)
    assert denoiser.init_ == "linear"


def test_the_fallback_warning_points_at_the_users_call():
    rng = np.random.default_rng(0)
    y = rng.integers(2, size=300)
    X = rng.normal(size=(300, 2)) + y[:, None]
    classifier = SoftmaxAttentionClassifier(head="bilinear", init="random", max_iter=3)
    with pytest.warns(UserWarning, match="scored worse") as caught:
        classifier.set_params(random_state=0).fit(X, y)
    assert caught[0].filename == __file__


def _fit_toy_starts(target, trial, start=0.0, learning_rate=0.1, max_iter=50):
    """``fit_starts`` on one scalar parameter ``a`` pulled from ``start``
    towards ``target`` by gradient descent; the validation loss is ``(a -
    1)^2`` per row, so the untrained reference (``a = 0``) scores 1.
    Returns the outcome and the number of steps run."""
    torch = pytest.importorskip("torch")
    from sk_softmix.training._selection import Selection, fit_starts
    from sk_softmix.training._solvers import TrainingSettings

    steps = []

    def objective(name, parameters):
        def loss_on(batch):
            if torch.is_grad_enabled():
                steps.append(1)
            return (parameters["a"] - target) ** 2

        def validation_losses(limit=None):
            return ((parameters["a"] - 1.0) ** 2).expand(8)

        return loss_on, validation_losses

    settings = TrainingSettings("gd", max_iter, learning_rate, 8, None, 5, 0, "Toy")
    outcome = fit_starts(
        {"start": {"a": np.array(start)}},
        ("linear", {"a": np.array(0.0)}),
        objective,
        settings,
        scale=1.0,
        powers={"a": 0},
        n_queries=8,
        validate=True,
        selection=Selection(start=0.0, checkpoint=None, trial=trial),
        random_state=np.random.RandomState(0),
        device=torch.device("cpu"),
    )
    return outcome, len(steps)


def test_the_cheap_test_stops_a_run_well_above_the_reference():
    # pulled towards -1, away from the validation optimum at 1: never better
    outcome, steps = _fit_toy_starts(target=-1.0, trial=0.2)
    assert outcome.start == "linear" and not outcome.trained
    assert outcome.n_iter == 10 and steps <= 12  # a fifth of 50 steps
    outcome, steps = _fit_toy_starts(target=-1.0, trial=None)
    assert outcome.start == "linear" and outcome.n_iter == 50 and steps >= 50


def test_the_cheap_test_lets_a_run_below_the_reference_train_in_full():
    outcome, steps = _fit_toy_starts(target=1.0, trial=0.2)
    assert outcome.start == "start" and outcome.trained and outcome.n_iter == 50
    assert abs(float(outcome.parameters["a"]) - 1.0) < 0.05


def test_the_cheap_test_spares_a_run_within_its_margin():
    # at a = -0.04 the loss is 1.08 times the reference's; a slow step leaves
    # it at 1.04 after 10 steps (within 10%) and below 1 after 50
    outcome, _ = _fit_toy_starts(target=1.0, trial=0.2, start=-0.04, learning_rate=1e-3)
    assert outcome.start == "start" and outcome.n_iter == 50
    assert (float(outcome.parameters["a"]) - 1.0) ** 2 < 0.9


def test_the_sure_denoiser_on_noisy_digits_gets_to_the_wiener_map_in_a_fifth_of_its_steps():
    # no start ever beats the Wiener map here (user guide, "Model selection"):
    # both runs stop at the cheap test, a fifth of max_iter each
    from sklearn.datasets import load_digits

    clean = load_digits().data[:900] / 16.0
    noisy = clean + 0.3 * np.random.default_rng(0).normal(size=clean.shape)
    denoiser = SoftmaxAttentionDenoiser(2, noise_variance=0.09, max_iter=100, random_state=0)
    denoiser.fit(noisy)
    assert denoiser.init_ == "linear"
    assert denoiser.n_iter_ <= 2 * 20 + 2 * 10  # a check every 10 steps at most late


@pytest.mark.parametrize(
    "reference, mean, stops",
    [(1.0, 1.09, False), (1.0, 1.11, True), (-0.01, -0.0095, False), (-0.01, -0.0085, True)],
)
def test_the_cheap_tests_margin_is_a_tenth_of_the_references_size_either_sign(
    reference, mean, stops
):
    # SURE can be negative on nearly noiseless data: 10% of its size above it,
    # not 1.1 times it (which would be below a negative reference)
    torch = pytest.importorskip("torch")
    from sk_softmix.training._stopping import TrialCheck

    check = TrialCheck(lambda limit: torch.full((4,), mean), reference, at_iteration=10, margin=0.1)
    assert check.check() is False  # before the first step
    assert check.check() is stops  # after 10 steps
    assert check.check() is False  # checked once
