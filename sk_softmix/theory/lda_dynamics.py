"""Training one softmax head on an LDA population (Section 3 of the paper).

The population risk of the head's effective predictor (eq. 6-7), gradient
descent on it, and Theorem 3.6's initialisation on the invariant subspace
where gradient flow keeps the head. The coordinates and the construction
these start from are in :mod:`sk_softmix.theory.lda`.
"""

import numpy as np
from sklearn.utils import check_random_state

from .lda import _eq7, krylov_basis


def invariant_subspace_start(
    mean: np.ndarray, covariance: np.ndarray, random_state=None, rtol: float = 1e-10
) -> tuple:
    """Theorem 3.6's initialisation: ``U11 = 0``, ``u12 = 0``, ``v22 = 0``,
    ``v21`` a Gaussian vector projected onto ``K-perp``.

    From it gradient flow on the balanced symmetric population
    (``m_1 = -m_{-1} = m``, ``pi_+ = 1/2``) stays on the invariant subspace
    ``{u12 = 0, v22 = 0, v21 in K-perp, U11 P_K = 0}``, conserves
    ``||U11||_F^2 - ||v21||^2 = -||v21(0)||^2`` and converges exponentially
    to Bayes. A Gaussian ``v21`` without the projection (``init="zero"`` of
    :class:`~sk_softmix.SoftmaxAttentionClassifier`) is the paper's Figure 5
    heuristic instead: close to ``K-perp`` when ``dim K << d``.

    Parameters
    ----------
    mean : ndarray of shape (d,)
        ``m``.
    covariance : ndarray of shape (d, d)
        ``Gamma``.
    random_state : int, RandomState instance or None, default=None
        Seed of the Gaussian draw.
    rtol : float, default=1e-10
        As in :func:`krylov_basis`.

    Returns
    -------
    tuple of (U11 (d, d), u12 (d,), v21 (d,), v22 float)
        Parameters for :func:`population_gradient_descent`.

    Raises
    ------
    ValueError
        When ``K`` is the whole space, so that no nonzero ``v21(0)`` lies in
        ``K-perp``: by Proposition B.35, when ``Gamma`` has ``d`` distinct
        eigenvalues and ``m`` a component in each eigenspace (a generic
        covariance with a generic ``m``, such as one estimated from data).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda_dynamics import invariant_subspace_start
    >>> U11, u12, v21, v22 = invariant_subspace_start(
    ...     np.array([1.0, 1.0, 0.0]), np.diag([1.0, 2.0, 3.0]), random_state=0)
    >>> K = np.eye(3)[:, :2]  # m = e1 + e2 under diag(1, 2, 3): K = span(e1, e2)
    >>> bool(np.all(U11 == 0)), bool(np.abs(K.T @ v21).max() < 1e-12), bool(v21[2] != 0)
    (True, True, True)
    """
    basis = krylov_basis(mean, covariance, rtol)
    d = basis.shape[0]
    if basis.shape[1] == d:
        raise ValueError(
            f"The Krylov space of m under Gamma is all of R^{d}: no nonzero v21(0) is "
            "orthogonal to it, so Theorem 3.6's initialisation does not exist here. "
            "K is smaller than R^d only when Gamma has a repeated eigenvalue or m has no "
            "component in one of its eigenspaces (Proposition B.35 of the paper)."
        )
    draw = check_random_state(random_state).normal(size=d)
    v21 = draw - basis @ (basis.T @ draw)
    return np.zeros((d, d)), np.zeros(d), v21, 0.0


def population_risk(theta, X, y, means, covariance, prior):
    """The logistic risk of one head's effective predictor, averaged over ``(X, y)``.

    ``E log(1 + exp(-Y f_theta(X)))`` with ``f_theta`` of eq. 6-7: the risk
    ``R(theta)`` of Section 3 when ``(X, y)`` is a large sample of the LDA
    population. A torch scalar, differentiable with respect to the entries of
    ``theta`` that require grad (gradients, Hessians).

    Parameters
    ----------
    theta : sequence of (U11 (d, d), u12 (d,), v21 (d,), v22 ())
        Attention parameters, float64 tensors or arrays.
    X : ndarray of shape (n, d)
        Sample of the population.
    y : ndarray of shape (n,)
        Its labels in {-1, +1}.
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1`` of the population.
    covariance : ndarray of shape (d, d)
        The population's shared class covariance ``Gamma``.
    prior : float
        The population's ``pi_+``.

    Returns
    -------
    torch.Tensor
        The risk, a 0-d float64 tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda_dynamics import population_risk
    >>> X, y = np.array([[1.0], [-1.0]]), np.array([1.0, -1.0])
    >>> theta = (np.zeros((1, 1)), np.zeros(1), np.zeros(1), 0.0)  # f = 0
    >>> round(population_risk(theta, X, y, np.array([[-1.0], [1.0]]), np.eye(1), 0.5).item(), 4)
    0.6931
    """
    import torch

    def as_t(a):
        return torch.as_tensor(np.asarray(a, dtype=np.float64)) if not torch.is_tensor(a) else a

    U11, u12, v21, v22 = (as_t(p) for p in theta)
    X_t, y_t = as_t(X), as_t(y)
    m_minus, m_plus = as_t(means[0]), as_t(means[1])
    w, b, r, s = _eq7(U11, u12, v21, v22, m_minus, m_plus - m_minus, as_t(covariance))
    s0 = float(np.log(prior / (1 - prior)))
    scores = X_t @ w + b + r * torch.sigmoid(s0 + X_t @ s)
    return torch.nn.functional.softplus(-y_t * scores).mean()


def population_gradient_descent(
    theta: tuple,
    X: np.ndarray,
    y: np.ndarray,
    means: np.ndarray,
    covariance: np.ndarray,
    prior: float,
    *,
    learning_rate: float,
    n_steps: int,
) -> dict:
    """Gradient descent on the population logistic risk of one head (Section 3.3).

    The head enters only through its effective predictor
    ``f_theta(x) = w^T x + b + r sigmoid(s0 + s^T x)`` (eq. 6-7), so the
    population risk ``E log(1 + exp(-Y f_theta(X)))`` is an average over a
    large sample ``(X, y)`` of the LDA model; gradients flow back to
    ``theta = (U11, u12, v21, v22)`` through the map of eq. 7. A centrally
    symmetric sample (each ``(x, y)`` with its mirror ``(-x, -y)``) keeps the
    symmetries of the balanced case ``m_1 = -m_{-1}``, ``pi_+ = 1/2``
    exactly, as Theorem 3.6 assumes.

    Parameters
    ----------
    theta : tuple of (U11 (d, d), u12 (d,), v21 (d,), v22 float)
        Starting attention parameters.
    X : ndarray of shape (n, d)
        Sample of the population.
    y : ndarray of shape (n,)
        Its labels in {-1, +1}.
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1`` of the population.
    covariance : ndarray of shape (d, d)
        The population's shared class covariance ``Gamma``.
    prior : float
        The population's ``pi_+``.
    learning_rate : float
        Constant step size.
    n_steps : int
        Number of gradient steps.

    Returns
    -------
    dict
        ``"risk"`` (n_steps + 1,), ``"balance"`` ``||U11||_F^2 - ||v21||^2``
        (n_steps + 1,), and ``"theta"``, the final parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda_dynamics import population_gradient_descent
    >>> rng = np.random.default_rng(0)
    >>> means = np.array([[-1.0, 0.0], [1.0, 0.0]])
    >>> y = np.where(rng.random(1000) < 0.5, 1, -1)
    >>> X = rng.normal(size=(1000, 2)) + means[(y + 1) // 2]
    >>> theta = (np.zeros((2, 2)), np.zeros(2), np.array([0.0, 1.0]), 0.0)
    >>> run = population_gradient_descent(theta, X, y, means, np.eye(2), 0.5,
    ...                                   learning_rate=0.5, n_steps=50)
    >>> bool(run["risk"][-1] < run["risk"][0])
    True

    On a centrally symmetric sample, Theorem 3.6's subspace (``u12 = 0``,
    ``v22 = 0``, ``v21`` and the columns of ``U11`` along ``m`` at zero) is
    invariant, and the risk reaches that of the Bayes score ``w* = (2, 0)``:

    >>> X, y = np.concatenate([X, -X]), np.concatenate([y, -y])
    >>> run = population_gradient_descent(theta, X, y, means, np.eye(2), 0.5,
    ...                                   learning_rate=0.5, n_steps=50)
    >>> U11, u12, v21, v22 = run["theta"]
    >>> bool(np.allclose(u12, 0) and v22 == 0 and v21[0] == 0 and np.allclose(U11[:, 0], 0))
    True
    >>> bayes = np.logaddexp(0, -y * (X @ np.array([2.0, 0.0]))).mean()
    >>> bool(run["risk"][-1] <= bayes)  # the sample's own optimum is a bit lower
    True
    """
    import torch  # local: the rest of this module is NumPy only

    parameters = [torch.tensor(np.asarray(p, dtype=np.float64)).requires_grad_(True) for p in theta]
    U11, u12, v21, v22 = parameters
    risks, balances = [], []
    for step in range(n_steps + 1):
        risk = population_risk(parameters, X, y, means, covariance, prior)
        risks.append(risk.item())
        balances.append(float((U11**2).sum().detach() - (v21**2).sum().detach()))
        if step == n_steps:
            break
        gradients = torch.autograd.grad(risk, parameters)
        with torch.no_grad():
            for parameter, gradient in zip(parameters, gradients, strict=True):
                parameter -= learning_rate * gradient
    final = tuple(p.detach().numpy() for p in (U11, u12, v21, v22))
    return {"risk": np.array(risks), "balance": np.array(balances), "theta": final}
