"""Beyond memory: Ling et al.'s answers from a seeded subsample S, as certified one-sided bounds.

Where K and its work array (:data:`~deqlab.verification.relu_deq.KERNEL_BUFFERS` n×n float64
arrays) do not fit in the memory this process can get (``--n 1000000``: 16 TB), verify draws
S, s of the n points (:func:`draw`: seeded, named in the output), s the largest that fits
(:func:`size_for`, at most :data:`CAP`), and reads every least eigenvalue through Cauchy's
interlacing theorem: for a symmetric A and a principal submatrix A_S,

    λ_min(A) = min_x xᵀAx/xᵀx ≤ min_{x supported on S} xᵀAx/xᵀx = λ_min(A_S),

so any certified upper bound of λ_min(A_S) — a Rayleigh quotient of A_S with its rounding
(:func:`deqlab.theory.spectra.upper_bound`) — is one of λ_min(A). The direction, checked for
each quantity:

- λ* = λ_min(K): K_ij depends on x_i, x_j only, so K(X_S) = K_SS: λ* ≤ λ_min(K_SS);
- λ_min of the DEQ NTK: its entries too depend on the pair only: an upper bound likewise;
- λ_0 = λ_min(Z(0)ᵀZ(0)): 0 exactly when m < n (rank ≤ m) — always here: a width m ≥ n
  past memory is refused (:meth:`~deqlab.verification.checks.ReLUDEQCheck.memory_need`), as
  S would bound λ_0 from above only;
- below, only what holds for every data set: K ⪰ 0 (a Gram matrix, Definition 1) and the
  NTK ⪰ K: λ*, λ_min(NTK) ≥ 0.

With n itself in the conditions (‖X‖_F over all n points, exactly), the bounds turn into
one-sided answers, each in the direction the quantity moves (:func:`one_sided`): every width
Condition 1 needs is non-increasing in λ* and non-decreasing in ‖ŷ(0) − y‖₂, so with λ* at
its upper bound and ‖ŷ(0) − y‖₂ over the points of S (a partial sum of squares, a lower
bound) it is a certified *lower* bound — "at least"; Theorem 2's width scale
n²/λ*² log(n/(λ*t)) likewise; Eq. (9)'s margin bound m₀λ*/(8‖U‖²‖a‖²‖X‖_F²) an upper bound.
λ* > 0 (Theorem 3 (ii)) and λ_min(NTK) ≥ λ* cannot be decided from S: NOT MEASURED.
Assumption 2 (i)'s max |cos θ_ij| is measured over the pairs of S: a lower bound of the
maximum, which can show a parallel pair but not that there is none.

A width sweep (:mod:`deqlab.verification.sweep`) reads λ* the same way, and ``deqlab
kernel`` any of its matrices (:func:`spectrum`: λ_min from above, λ_max from below).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import torch

from deqlab._memory import (
    HEADROOM,
    available_memory,
    largest_square,
    nbytes,
    square_bytes,
)
from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics
from deqlab.statements import Statement, Verdict
from deqlab.theory.brackets import Bracket, abs_row_norm, rayleigh_lower
from deqlab.theory.kernels import LeastEigenvalue, population_gram
from deqlab.theory.ntk import deq_ntk
from deqlab.theory.spectra import Reuse, estimate_least, upper_bound
from deqlab.verification.progress import Progress, silent

#: At most this many points: a subsample's λ_min bounds λ* whatever its size, and s = 1.2·10⁴
#: keeps the kernels' part of the answer under a minute on two cores (a float32 factorization
#: of s³/3 flops, LOBPCG on s×s), beside drawing and checking 10⁶ inputs (half a minute).
CAP = 12_000
#: Fewer points than this cannot say anything worth the wait: verify refuses instead.
LEAST = 100
#: Power iterations for the vector whose Rayleigh quotient bounds λ_max from below (any
#: vector gives a bound; a kernel's top eigenvalue is well separated, so a few suffice).
POWER_STEPS = 30
#: How the one-sided numbers are read (``numbers["one_sided"]``).
DIRECTIONS = {
    "lambda_star": "upper bound: a Rayleigh quotient of K_SS, Cauchy interlacing",
    "ntk_lambda_min": "upper bound: a Rayleigh quotient of the NTK on S, Cauchy interlacing",
    "residual_norm": "lower bound: ‖ŷ(0) − y‖₂ over the points of S (a partial sum)",
    "loss0": "lower bound: Φ(0) over the points of S",
    "required_width": "lower bounds (at least): non-increasing in λ*, non-decreasing in the "
    "residual",
    "theorem2_width.scale": "lower bound (at least): decreasing in λ*",
    "eq9_limit": "upper bounds: increasing in λ*",
}


@dataclass(frozen=True, eq=False)
class Subsample:
    """S: ``size`` of the ``n`` points, drawn with ``seed`` (``indices``, sorted)."""

    n: int
    size: int
    seed: int
    indices: torch.Tensor

    @property
    def name(self) -> str:
        return f"S = {self.size:,} of the {self.n:,} points (seed {self.seed})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "size": self.size,
            "seed": self.seed,
            "drawn": "torch.randperm(n) with a generator seeded with `seed`, the first `size`, "
            "sorted",
            "first_indices": [int(i) for i in self.indices[:10]],
        }


def size_for(n: int, d: int, *, buffers: float, per_point: int, device: str = "cpu") -> int | None:
    """None where ``buffers`` n×n float64 arrays and ``per_point`` bytes a point fit on
    ``device``; else the size of the subsample that does beside the whole inputs (at most
    :data:`CAP`), or None where not even :data:`LEAST` points do (then the caller's memory
    check refuses, with its message)."""
    found = available_memory(device)
    if found is None:
        return None
    available = found[0]
    if square_bytes(n, buffers, per_point=per_point) <= available - HEADROOM:
        return None
    usable = available - HEADROOM - 8 * 2 * n * d  # X and its (d, n) copy stay whole
    size = min(CAP, n - 1, largest_square(buffers, max(usable, 0), per_point=per_point))
    return size if size >= LEAST else None


def draw(n: int, size: int, seed: int) -> Subsample:
    """:class:`Subsample` of ``size`` points of ``n``, seeded."""
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randperm(n, generator=generator)[:size].sort().values
    return Subsample(n, size, seed, indices)


def diagnostics(columns: torch.Tensor, sample: Subsample) -> InputDiagnostics:
    """Assumption 2 against the columns (d, n): the norms over all n points, the largest
    |cos θ_ij| over the pairs of S (indices of ``columns``)."""
    found = input_diagnostics(columns[:, sample.indices])
    norms = columns.norm(dim=0) / math.sqrt(columns.shape[0])
    i, j = found.closest_pair
    return replace(
        found,
        n=columns.shape[1],
        closest_pair=(int(sample.indices[i]), int(sample.indices[j])),
        max_norm_error=float((norms - 1).abs().max()),
    )


def kernels(X_S: torch.Tensor, sigma_w2: float, sample: Subsample, progress: Progress = silent):
    """(K, NTK) as :class:`~deqlab.theory.kernels.LeastEigenvalue` of the full data, from
    the points of S: each value a certified upper bound (module docstring), each bracket
    [0, that bound]."""
    with warnings.catch_warnings():  # Assumption 1 is reported as a hypothesis statement
        warnings.simplefilter("ignore")
        gram = population_gram(X_S, sigma_w2, progress=progress)
        work, reuse = torch.empty_like(gram), Reuse()
        found = estimate_least(gram, work=work, reuse=reuse, progress=progress)
        K = _upper(gram, found, work, reuse, "λ* ≥ 0: K is a Gram matrix (Definition 1)")
        kernel = deq_ntk(X_S, sigma_w2, gram=gram, out=gram, progress=progress)
        found = estimate_least(kernel, work=work, reuse=reuse, progress=progress)
        ntk = _upper(kernel, found, work, reuse, "λ_min(NTK) ≥ λ* ≥ 0: NTK = K + P⊙K ⪰ K ⪰ 0")
    return K, ntk


def spectrum(M: torch.Tensor, lower_proof: str, progress: Progress = silent):
    """(λ_min, a lower bound of λ_max with its proof) of a PSD matrix from M, its principal
    submatrix on S: λ_min as :func:`kernels` gives it ([0, a certified upper bound]; below,
    ``lower_proof``), and λ_max ≥ λ_max(M) ≥ the Rayleigh quotient of a power iterate of M
    less its rounding (Cauchy interlacing; :func:`deqlab.theory.brackets.rayleigh_lower`)."""
    work, reuse = torch.empty_like(M), Reuse()
    least = _upper(M, estimate_least(M, work=work, reuse=reuse, progress=progress), work, reuse,
                   lower_proof)  # fmt: skip
    x = torch.ones(M.shape[0], dtype=M.dtype, device=M.device)
    for _ in range(POWER_STEPS):
        x = M @ x
        x /= x.norm()
    top, proof = rayleigh_lower(M, x, abs_row_norm(M))
    return least, (top, f"Cauchy interlacing: λ_max ≥ λ_max on S ≥ {proof}")


def _upper(M: torch.Tensor, found, work, reuse: Reuse, lower_proof: str) -> LeastEigenvalue:
    bound, proof = upper_bound(M, found, work=work, reuse=reuse)
    upper_proof = f"Cauchy interlacing: λ_min ≤ λ_min on S ≤ {proof}"
    bracket = Bracket(0.0, bound, lower_proof, upper_proof)
    return LeastEigenvalue(bound, bound, found.top, found.tolerance, False, "", bracket)


def rank_zero(m: int, n: int) -> LeastEigenvalue:
    """λ_0 = 0 exactly: Z(0)ᵀZ(0) has rank ≤ m < n."""
    proof = f"rank(Z(0)ᵀZ(0)) ≤ m = {m} < n = {n}: λ_0 = 0 exactly"
    reason = f"m = {m} < n = {n}: Z(0)ᵀZ(0) has rank ≤ m"
    return LeastEigenvalue(0.0, 0.0, math.nan, 0.0, True, reason, Bracket(0.0, 0.0, proof, proof))


def one_sided(statements: list[Statement], sample: Subsample) -> list[Statement]:
    """The statements of a subsample, each decided only where its one-sided bound decides
    it (module docstring): Theorem 3 (ii), the NTK's and a met Theorem 2 scale or
    Assumption 2 (i) pair hypothesis become NOT MEASURED, saying why."""
    return [_one_sided(s, sample) for s in statements]


#: Statements a subsample cannot decide in some verdicts: (part of the name, the verdicts it
#: leaves undecided, why).
_UNDECIDED = (
    (
        "Theorem 3 (ii)",
        (Verdict.PASS, Verdict.FAIL),
        "λ* > 0 cannot be decided from a "
        "subsample: λ* ≤ λ_min on S (Cauchy interlacing) bounds it from above only",
    ),
    (
        "DEQ NTK",
        (Verdict.PASS, Verdict.FAIL),
        "λ_min(NTK) and λ* are both bounded from above only on a subsample",
    ),
    (
        "its constant taken as 1",
        (Verdict.HOLDS,),
        "λ* ≤ its bound on S makes the width "
        "scale a lower bound: that the hypothesis holds is not certified",
    ),
    (
        "no two inputs parallel",
        (Verdict.HOLDS,),
        "|cos θ_ij| is measured over the pairs of S only: a lower bound of the maximum",
    ),
)


def _one_sided(s: Statement, sample: Subsample) -> Statement:
    for part, verdicts, why in _UNDECIDED:
        if part in s.name and s.verdict in verdicts:
            detail = f"{why} ({sample.name}). {s.detail}"
            return replace(s, verdict=Verdict.NOT_MEASURED, needs="", detail=detail)
    if "m ≥" in s.needs:
        return replace(s, needs=f"at least, from {sample.name}: {s.needs}")
    return s


def why(n: int, buffers: float, what: str = "K and its work array", device: str = "cpu") -> str:
    """Why n points are past memory: what ``buffers`` n×n float64 arrays need, and the memory
    available with where that figure comes from."""
    need, (available, source) = square_bytes(n, buffers), available_memory(device) or (0, "")
    return (
        f"n = {n:,} needs {nbytes(need)} for {what} ({buffers:g} n×n float64), "
        f"{nbytes(available)} of memory is available ({source})"
    )


def numbers(sample: Subsample, buffers: float) -> dict[str, Any]:
    """What the output says of the subsample: S, why, and how each one-sided number is read."""
    return {
        "subsample": {**sample.as_dict(), "why": why(sample.n, buffers)},
        "one_sided": DIRECTIONS,
    }


def line(numbers: dict[str, Any]) -> str | None:
    """The line the output opens with past memory (None otherwise)."""
    sample = numbers.get("subsample")
    if sample is None:
        return None
    return (
        f"beyond memory: {sample['why']}; the answers come from the subsample S = "
        f"{sample['size']:,} of the {sample['n']:,} points (seed {sample['seed']}) as "
        "certified one-sided bounds (Cauchy interlacing): λ* and λ_min(NTK) from above, "
        "every width from below ('at least')"
    )
