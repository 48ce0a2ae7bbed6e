"""Convergence theory of deep equilibrium linear models (Kawaguchi, ICLR 2021, Section 3.1).

Notation of the paper: A (m, m), B (m_y, m), γ ∈ (0, 1), U = I − γσ(A), Z = B U⁻¹ (the
equivalent linear predictor), Φ (m, n) the feature matrix (samples are columns), and the
softmax Jacobians (J_k)_ij = ∂σ(A)_ik / ∂A_jk = diag(s_k) − s_k s_kᵀ with s_k = σ(A)_{*k}.

Under gradient flow (Eq. 6) the predictor moves as d vec(Z_t)/dt = −D_t vec(∇L₀(Z_t))
(Appendix A.1.5, Eq. 26), with vec the column-stacking vectorization and

    D_t = Σ_k (U_t⁻ᵀ)_{*k} (U_t⁻¹)_{k*} ⊗ (I_{m_y} + γ² Z_t J_{k,t} J_{k,t}ᵀ Z_tᵀ)    (Eq. 8),

positive definite with λ_min(D_t) ≥ 1/(m(1+γ)²) (Eq. 33).  Theorem 1 then gives, for a
loss whose linear-model objective L₀ satisfies the PL inequality with parameter κ,

    L(A_T, B_T) ≤ L*_R + (L(A₀, B₀) − L*_{0,R}) exp(−2κ λ_T T),  λ_T = inf_{t≤T} λ_min(D_t)  (Eq. 7)

with κ = 2σ_min(Φ)² for the square loss (Corollary 1, R = ∞, L*_R = L*_{0,R} = L*) and
κ = (2τ + ρ(R)) σ_min(Φ)² for the logistic loss (Corollary 2).

The corollaries' hypotheses are measured with: the rank of Φ (:func:`rank_ratio`), the
PL inequality of Definition 1 at a predictor (:func:`pl_ratio`), and the largest Hessian
eigenvalue of L (:func:`objective_sharpness`), which says whether a gradient-descent step
follows the gradient flow (Eq. 6) the theorems are stated for.

Eqs. (9)–(12): :func:`time_to_accuracy`. Theorem 2 (the dynamics as a trust-region Newton
method) and Appendix B are in :mod:`.trust_region`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import minimize

from deqlab._checks import check_choice, check_int, check_real, check_tensor
from deqlab.models.delm import check_gamma, column_softmax, equilibrium_matrix

#: The losses of the two corollaries: square (Corollary 1), logistic + τq² (Corollary 2).
LOSSES = ("square", "logistic")


def check_AB(A: object, B: object) -> tuple[torch.Tensor, torch.Tensor]:
    check_tensor("A", A, ndim=2)
    m = A.shape[0]
    check_tensor("A", A, shape=(m, m))
    check_tensor("B", B, shape=(None, m))
    return A, B


def check_radius(radius: object) -> float:
    """R ∈ (0, ∞]: a positive real or ``math.inf``."""
    if isinstance(radius, float) and radius == math.inf:
        return radius
    return check_real("radius", radius, low=0.0, low_inclusive=False)


def softmax_jacobians(A: torch.Tensor) -> torch.Tensor:
    """J (m, m, m) with J[k] = J_k = diag(s_k) − s_k s_kᵀ, s_k = σ(A)_{*k} (Section 3.1.1)."""
    check_tensor("A", A, ndim=2)
    S = column_softmax(A)  # (m, m), column k = s_k
    s = S.mT  # (m, m), row k = s_k
    return torch.diag_embed(s) - s[:, :, None] * s[:, None, :]


def dynamics_matrix(A: torch.Tensor, B: torch.Tensor, gamma: float) -> torch.Tensor:
    """D of Eq. (8), shape (m·m_y, m·m_y), acting on column-stacked vec(W) for W (m_y, m).

    Computed as D[(a, c), (b, d)] = Σ_k V_ka V_kb M_k[c, d] with V = U⁻¹ and
    M_k = I + γ² (Z J_k)(Z J_k)ᵀ, which is the Kronecker sum of Eq. (8) with the row-major
    index a·m_y + c of the Kronecker product.
    """
    A, B = check_AB(A, B)
    gamma = check_gamma(gamma)
    m, m_y = A.shape[0], B.shape[0]
    S = column_softmax(A)  # (m, m)
    U = torch.eye(m, dtype=A.dtype, device=A.device) - gamma * S
    V = torch.linalg.inv(U)  # (m, m), row k = (U⁻¹)_{k*}
    Z = B @ V  # (m_y, m)
    s = S.mT  # (m, m), row k = s_k
    # Z J_k = Z diag(s_k) − (Z s_k) s_kᵀ, stacked over k: (m, m_y, m)
    ZJ = Z[None, :, :] * s[:, None, :] - (Z @ S).mT[:, :, None] * s[:, None, :]
    eye_y = torch.eye(m_y, dtype=A.dtype, device=A.device)
    M = eye_y + gamma**2 * ZJ @ ZJ.mT  # (m, m_y, m_y)
    D = torch.einsum("ka,kb,kcd->acbd", V, V, M)  # (m, m_y, m, m_y)
    return D.reshape(m * m_y, m * m_y)


def lambda_min_dynamics(A: torch.Tensor, B: torch.Tensor, gamma: float) -> torch.Tensor:
    """λ_min(D) of Eq. (8), a 0-D tensor (symmetrized before eigvalsh)."""
    D = dynamics_matrix(A, B, gamma)
    return torch.linalg.eigvalsh(0.5 * (D + D.mT))[0]


def lambda_lower_bound(m: int, gamma: float) -> float:
    """The initialization-independent bound λ_T ≥ 1/(m(1+γ)²) of Theorem 1 (Eq. 33)."""
    m = check_int("m", m, min_value=1)
    gamma = check_gamma(gamma)
    return 1.0 / (m * (1.0 + gamma) ** 2)


def square_loss(Q: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Σ_i ‖q_i − y_i‖² = ‖Q − Y‖_F² for predictions and targets of shape (m_y, n) (Cor. 1)."""
    check_tensor("Q", Q, ndim=2)
    check_tensor("Y", Y, shape=tuple(Q.shape))
    return ((Q - Y) ** 2).sum()


def logistic_loss(q: torch.Tensor, y: torch.Tensor, tau: float = 0.0) -> torch.Tensor:
    """Σ_i [−y_i log s(q_i) − (1 − y_i) log(1 − s(q_i)) + τ q_i²], q and y of shape (1, n) (Cor. 2).

    s is the logistic sigmoid; log s(q) = −softplus(−q), so the sum is computed stably as
    Σ_i [y_i softplus(−q_i) + (1 − y_i) softplus(q_i) + τ q_i²].
    """
    check_tensor("q", q, ndim=2)
    if q.shape[0] != 1:
        raise ValueError(
            f"`q` must have shape (1, n) (scalar outputs, m_y = 1); got {tuple(q.shape)}"
        )
    check_tensor("y", y, shape=tuple(q.shape))
    tau = check_real("tau", tau, low=0.0)
    if bool(((y != 0) & (y != 1)).any()):
        raise ValueError("`y` must hold labels in {0, 1}")
    nll = y * torch.nn.functional.softplus(-q) + (1 - y) * torch.nn.functional.softplus(q)
    return (nll + tau * q**2).sum()


def feature_sigma_min(Phi: torch.Tensor, *, require_full_row_rank: bool = False) -> float:
    """σ_min(Φ) as the corollaries' κ takes it: σ_r(Φ), the r-th singular value of Φ (m, n)
    (Section 3.1.1), r = min(m, n) for Corollary 1 and r = m for Corollary 2
    (``require_full_row_rank=True``).

    0 where rank(Φ) < r — numerically, σ_r/σ_1 ≤ :func:`rank_tolerance`, or n < m for r = m:
    the corollary's rank hypothesis then fails (:func:`rank_ratio` measures it), κ = 0 and
    Theorem 1's bound (Eq. 7) is vacuous, L ≤ L*_R + L(A₀, B₀) − L*_{0,R}.
    """
    check_tensor("Phi", Phi, ndim=2)
    m, n = Phi.shape
    if require_full_row_rank and n < m:
        return 0.0
    sv = torch.linalg.svdvals(Phi)
    smin = float(sv[-1])
    return 0.0 if smin <= sv[0].item() * rank_tolerance(Phi) else smin


def rank_tolerance(Phi: torch.Tensor) -> float:
    """max(m, n)·ε of Φ's dtype: σ_k(Φ)/σ_1(Φ) at or below it counts as zero (numerical rank)."""
    check_tensor("Phi", Phi, ndim=2)
    return max(Phi.shape) * torch.finfo(Phi.dtype).eps


def rank_ratio(Phi: torch.Tensor, rank: int) -> float:
    """σ_rank(Φ)/σ_1(Φ): > :func:`rank_tolerance` iff rank(Φ) ≥ ``rank`` (0 if rank > min(m, n)).

    Corollary 1 assumes rank(Φ) = min(n, m), Corollary 2 rank(Φ) = m (Section 3.1.3).
    """
    check_tensor("Phi", Phi, ndim=2)
    rank = check_int("rank", rank, min_value=1)
    sv = torch.linalg.svdvals(Phi)
    if rank > sv.numel() or float(sv[0]) == 0.0:
        return 0.0
    return float(sv[rank - 1] / sv[0])


def square_loss_optimum(Phi: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W*, L*) with W* = Y Φ⁺ minimizing L₀(W) = ‖WΦ − Y‖_F² (Eq. 2, Appendix A.3).

    Because Z = B U⁻¹ ranges over all of R^{m_y×m} (B = W U), L* = inf_{A,B} L(A, B) equals
    the linear-model optimum L*₀ (Corollary 1).  Returns W* (m_y, m) and L* (0-D tensor).
    """
    check_tensor("Phi", Phi, ndim=2)
    check_tensor("Y", Y, shape=(None, Phi.shape[1]))
    W = Y @ torch.linalg.pinv(Phi)  # (m_y, m)
    return W, square_loss(W @ Phi, Y)


def logistic_rho(Phi: torch.Tensor, radius: float) -> float:
    """ρ(R) = inf_{‖W‖₁<R, i} p_i(1 − p_i), p_i = s(W φ(x_i)), for m_y = 1 (Corollary 2).

    For W (1, m) the induced 1-norm is max_j |W_1j|, so sup |W φ(x_i)| = R ‖φ(x_i)‖₁ and,
    p(1 − p) decreasing in |q|, ρ(R) = min_i s(R‖φ(x_i)‖₁)(1 − s(R‖φ(x_i)‖₁)); ρ(∞) = 0.
    """
    check_tensor("Phi", Phi, ndim=2)
    radius = check_radius(radius)
    if radius == math.inf:
        return 0.0
    q = radius * Phi.abs().sum(dim=0).max()
    p = torch.sigmoid(q)
    return float(p * torch.sigmoid(-q))


def logistic_loss_optimum(
    Phi: torch.Tensor, y: torch.Tensor, *, tau: float = 0.0, radius: float = math.inf
) -> tuple[torch.Tensor, torch.Tensor]:
    """(W*, L*_{0,R}) = argmin/min of L₀(W) over max_j |W_1j| ≤ R for the logistic loss (Cor. 2).

    L₀ is convex, so L-BFGS-B (scipy, float64, box constraints for finite R) finds the
    global minimum; the infimum over the open ball equals the minimum over its closure.
    With τ = 0, R = ∞ and separable data the infimum 0 is not attained: the returned value
    is then the (small) loss where L-BFGS-B stops.  By Theorem 1's proof (Eq. 31) the bound
    holds with L*_{0,R} ≤ L*_R in place of L*_R.
    """
    check_tensor("Phi", Phi, ndim=2)
    check_tensor("y", y, shape=(1, Phi.shape[1]))
    tau = check_real("tau", tau, low=0.0)
    radius = check_radius(radius)
    Phi_np = Phi.detach().cpu().double().numpy()
    y_np = y.detach().cpu().double().numpy()[0]
    logistic_loss(Phi.new_zeros(1, Phi.shape[1]), y, tau)  # validates the labels

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        q = w @ Phi_np  # (n,)
        nll = y_np * np.logaddexp(0.0, -q) + (1 - y_np) * np.logaddexp(0.0, q)
        dq = 1.0 / (1.0 + np.exp(-q)) - y_np + 2 * tau * q  # dℓ/dq
        return float(nll.sum() + tau * (q**2).sum()), Phi_np @ dq

    bounds = None if radius == math.inf else [(-radius, radius)] * Phi_np.shape[0]
    result = minimize(
        objective, np.zeros(Phi_np.shape[0]), jac=True, method="L-BFGS-B", bounds=bounds,
        options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10},
    )  # fmt: skip
    W = torch.as_tensor(result.x, dtype=Phi.dtype, device=Phi.device)[None, :]
    return W, logistic_loss(W @ Phi, y, tau)


def corollary1_kappa(Phi: torch.Tensor) -> float:
    """κ = 2 σ_min(Φ)², the PL parameter of the square loss (Corollary 1, Appendix A.3); 0
    where rank(Φ) < min(m, n) (:func:`feature_sigma_min`: the bound is then vacuous)."""
    return 2.0 * feature_sigma_min(Phi) ** 2


def corollary2_kappa(Phi: torch.Tensor, *, tau: float, radius: float = math.inf) -> float:
    """κ = (2τ + ρ(R)) σ_min(Φ)², the PL parameter of the logistic loss (Cor. 2, App. A.4);
    0 where rank(Φ) < m (:func:`feature_sigma_min`: the bound is then vacuous)."""
    tau = check_real("tau", tau, low=0.0)
    return (2.0 * tau + logistic_rho(Phi, radius)) * feature_sigma_min(
        Phi, require_full_row_rank=True
    ) ** 2


def convergence_bound(
    loss_init: float,
    loss_star: float,
    kappa: float,
    lambda_T: torch.Tensor | float,
    T: torch.Tensor | float,
    *,
    loss_star_linear: float | None = None,
) -> torch.Tensor:
    """L*_R + (L(A₀, B₀) − L*_{0,R}) exp(−2κ λ_T T), the right side of Theorem 1 (Eq. 7).

    ``lambda_T`` and ``T`` broadcast (a trajectory of running infima and times gives the
    bound along the trajectory).  ``loss_star_linear`` is L*_{0,R}; it defaults to
    ``loss_star`` (both equal L* for the square loss, Corollary 1).
    """
    kappa = check_real("kappa", kappa, low=0.0)
    loss_star_linear = loss_star if loss_star_linear is None else loss_star_linear
    lam = torch.as_tensor(lambda_T, dtype=torch.float64)
    T = torch.as_tensor(T, dtype=torch.float64)
    if bool((lam <= 0).any()) or bool((T < 0).any()):
        raise ValueError("`lambda_T` must be > 0 and `T` must be >= 0")
    return loss_star + (loss_init - loss_star_linear) * torch.exp(-2.0 * kappa * lam * T)


def time_to_accuracy(m: int, gamma: float, kappa: float, gap0: float, eps: float) -> float:
    """T_ε = m(1+γ)²/(2κ) · log(gap0/ε): from then on L(A_T, B_T) − L*_R ≤ ε (Eq. 9).

    Theorem 1 with the worst case λ_T = 1/(m(1+γ)²) gives gap0·e^{−2κT/(m(1+γ)²)} ≤ ε
    for T ≥ T_ε, gap0 = L(A₀, B₀) − L*_{0,R}.  With each corollary's κ this is Eq. (10)
    (square loss, κ = 2σ_min(Φ)²), Eq. (11) (logistic, R = ∞, κ = 2τσ_min(Φ)²) and Eq. (12)
    (logistic, τ = 0, R < ∞, κ = ρ(R)σ_min(Φ)²).  0 when gap0 ≤ ε; ∞ when κ = 0.
    """
    m = check_int("m", m, min_value=1)
    gamma = check_gamma(gamma)
    kappa = check_real("kappa", kappa, low=0.0)
    eps = check_real("eps", eps, low=0.0, low_inclusive=False)
    if gap0 <= eps:
        return 0.0
    if kappa == 0.0:
        return math.inf
    return m * (1.0 + gamma) ** 2 / (2.0 * kappa) * math.log(gap0 / eps)


def linear_objective(
    W: torch.Tensor, Phi: torch.Tensor, Y: torch.Tensor, *, loss: str = "square", tau: float = 0.0
) -> torch.Tensor:
    """L₀(W) = Σ_i ℓ(W φ(x_i), y_i) (Eq. 2): the square loss (Cor. 1) or logistic + τq² (Cor. 2)."""
    check_choice("loss", loss, LOSSES)
    check_tensor("W", W, shape=(None, Phi.shape[0]))
    Q = W @ Phi  # (m_y, n)
    return square_loss(Q, Y) if loss == "square" else logistic_loss(Q, Y, tau)


def delm_objective(
    A: torch.Tensor,
    B: torch.Tensor,
    Phi: torch.Tensor,
    Y: torch.Tensor,
    gamma: float,
    *,
    loss: str = "square",
    tau: float = 0.0,
) -> torch.Tensor:
    """L(A, B) = L₀(B U⁻¹) with U = I − γσ(A) (Eq. 5: the DELM's output is B U⁻¹ φ(x))."""
    A, B = check_AB(A, B)
    U = equilibrium_matrix(A, check_gamma(gamma))
    W = torch.linalg.solve(U.mT, B.mT).mT  # (m_y, m) = B U⁻¹
    return linear_objective(W, Phi, Y, loss=loss, tau=tau)


def objective_sharpness(
    A: torch.Tensor,
    B: torch.Tensor,
    Phi: torch.Tensor,
    Y: torch.Tensor,
    gamma: float,
    *,
    loss: str = "square",
    tau: float = 0.0,
) -> float:
    """λ_max(∇²L(A, B)): the largest Hessian eigenvalue of Eq. (5) over θ = (A, B).

    Gradient descent with step η is the Euler discretization of the flow (Eq. 6); by the
    descent lemma a step decreases L by at least η(1 − ηλ_max/2)‖∇L‖², so ηλ_max says how
    far the step is from following the flow.  The Hessian is formed exactly by autograd.
    """
    A, B = check_AB(A, B)
    sizes = (A.numel(), B.numel())

    def objective(theta: torch.Tensor) -> torch.Tensor:
        a, b = theta.split(sizes)
        return delm_objective(a.view_as(A), b.view_as(B), Phi, Y, gamma, loss=loss, tau=tau)

    theta = torch.cat([A.detach().reshape(-1), B.detach().reshape(-1)])
    H = torch.autograd.functional.hessian(objective, theta)  # (p, p)
    return float(torch.linalg.eigvalsh(0.5 * (H + H.mT))[-1])


def pl_ratio(
    W: torch.Tensor,
    Phi: torch.Tensor,
    Y: torch.Tensor,
    *,
    kappa: float,
    loss_star: float,
    loss: str = "square",
    tau: float = 0.0,
) -> float:
    """½‖∇L₀(W)‖²_F / (κ (L₀(W) − L*₀)): ≥ 1 iff the PL inequality (Definition 1) holds at W.

    Corollaries 1–2 rest on L₀ satisfying it with κ = 2σ_min(Φ)² (square loss) or
    (2τ + ρ(R))σ_min(Φ)² (logistic loss); the ratio measures it at a given predictor.
    Returns NaN when W is at the minimum (L₀(W) ≤ L*₀: the inequality is then 0 ≥ 0).
    """
    kappa = check_real("kappa", kappa, low=0.0, low_inclusive=False)
    W = W.detach().clone().requires_grad_()
    value = linear_objective(W, Phi, Y, loss=loss, tau=tau)
    (grad,) = torch.autograd.grad(value, W)
    gap = float(value.detach()) - loss_star
    if gap <= 0:
        return math.nan
    return 0.5 * float((grad**2).sum()) / (kappa * gap)
