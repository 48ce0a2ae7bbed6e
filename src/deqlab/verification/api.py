"""``verify(X, y, model)``: every hypothesis and prediction of one paper on given data.

One call validates the data (:mod:`deqlab.verification.inputs`), runs the model's check
(:mod:`deqlab.verification.checks`: one frozen dataclass per model, e.g.
``ReLUDEQCheck(width=500, sigma_w2=0.08)``) and returns a :class:`Verification`: the
one-line answers (:mod:`deqlab.verification.answers`) and the stand-ins
(:mod:`deqlab.verification.stand_ins`), the statements (the same
:class:`~deqlab.statements.Statement` objects the experiments report) and every number
under a stable key. ``deqlab verify`` prints it, as lines and a table or as JSON, and
writes it as an HTML page with figures; in Jupyter it shows itself (``_repr_html_``,
``_repr_png_``), and :meth:`Verification.to_frame` gives the statements as a DataFrame.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import deqlab
from deqlab._checks import check_int, check_positive
from deqlab.devices import check_device
from deqlab.statements import Counts, Statement
from deqlab.verification.answers import Answer
from deqlab.verification.checks import CHECKS, Check, check_for
from deqlab.verification.flow import run_check
from deqlab.verification.inputs import prepare
from deqlab.verification.memory import check_memory, draw_subsample
from deqlab.verification.progress import Progress, silent
from deqlab.verification.stand_ins import StandIns, standins

#: Each model's symbols and the options they come from (one notation per model).
LEGENDS = {
    "relu-deq": "symbols: n samples, d features, m width (--width), σ_w² (--sigma-w2), "
    "η step size (--eta), Φ the loss",
    "mondeq": "symbols (the thesis'): N samples, d features, n width (--width), "
    "m monotonicity (--monotonicity), R radius (--radius), η step size (--eta)",
    "delm": "symbols: n samples, m = d the width (φ(x) = x), γ (--gamma), τ (--tau), "
    "R (--logistic-radius), ε (--epsilon), η step size (--eta)",
}


@dataclass(frozen=True, eq=False)
class Verification:
    """What :func:`verify` found: ``answers`` (one per theorem), ``stand_ins`` (ours),
    ``statements`` and ``numbers`` (stable keys, see :meth:`as_dict`), ``training`` (None
    without ``train``), and the measured objects (``initial``, ``run``) of the figures."""

    model: str
    data: dict[str, Any]
    settings: dict[str, Any]
    numbers: dict[str, Any]
    training: dict[str, Any] | None
    statements: list[Statement]
    answers: list[Answer]
    stand_ins: StandIns
    initial: Any = field(repr=False)
    run: Any = field(repr=False, default=None)

    @property
    def counts(self) -> Counts:
        return Counts.of(self.statements)

    @property
    def paper(self) -> str:
        """ "Ling et al. 2023: ReLU DEQ, Condition 1, Theorems 1–3"-like (the header line)."""
        check = CHECKS[self.model]
        return f"{check.paper.short}: {check.covers}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON document: model, data, settings, answers, stand-ins, numbers, training,
        statements, verdicts."""
        counts = self.counts
        return {
            "deqlab_version": deqlab.__version__,
            "model": self.model,
            "paper": self.paper,
            "citation": CHECKS[self.model].paper.full,
            "legend": LEGENDS[self.model],
            "data": self.data,
            "settings": self.settings,
            "answers": [a.as_dict() for a in self.answers],
            "stand_ins": self.stand_ins.as_dict(),
            "numbers": self.numbers,
            "training": self.training,
            "statements": [s.as_dict() for s in self.statements],
            "verdicts": counts.as_dict(),
            "verdict_sentence": counts.sentence(),
        }

    def to_frame(self):
        """The statements as a pandas DataFrame, one row each."""
        import pandas as pd

        return pd.DataFrame([s.as_dict() for s in self.statements])

    def write_html(self, out: str | os.PathLike[str]) -> Path:
        """Write the page (``<out>/index.html``) with its figures; return its path."""
        from deqlab.verification.page import write_page

        return write_page(self, Path(out))

    def _repr_html_(self) -> str:
        """The page, figures embedded, for Jupyter."""
        with tempfile.TemporaryDirectory() as tmp:
            return self.write_html(tmp).read_text(encoding="utf-8")

    def _repr_png_(self) -> bytes | None:
        """The first figure as PNG bytes (None when there is none)."""
        from deqlab.verification.figures import draw

        with tempfile.TemporaryDirectory() as tmp:
            drawn = draw(self, Path(tmp))
            return (Path(tmp) / f"{drawn[0][0]}.png").read_bytes() if drawn else None


def verify(
    X: object,
    y: object,
    model: str | Check = "relu-deq",
    *,
    seed: int = 0,
    train: int = 0,
    eta: float | None = None,
    target_loss: float | None = None,
    normalize: bool = False,
    standardize: bool = False,
    device: str = "cpu",
    name: str = "data",
    labels: str = "y",
    progress: Progress = silent,
) -> Verification:
    """Check one paper's hypotheses and predictions on ``X`` (n, d) and ``y`` (n,).

    Args:
        model: a check (:class:`~deqlab.verification.checks.ReLUDEQCheck`, ``MonDEQCheck``,
            ``DELMCheck``, holding the model's settings) or its name, ``"relu-deq"``,
            ``"mondeq"``, ``"delm"``, for its defaults.
        seed: the draw of the network at initialization.
        train: GD steps (0: none) with ``eta``, by default the theorem's step size; refused
            where K does not fit in memory (then the ReLU DEQ is answered from a subsample:
            :mod:`deqlab.verification.subsample`).
        target_loss: the loss the stand-ins' steps are counted to (default 10⁻³ Φ(0)).
        normalize: scale every input to norm √d (Assumption 2, what the theorems assume).
        standardize: each feature to zero mean and unit variance first (ours).
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``: where the ReLU DEQ's K, NTK and
            their least eigenvalues are computed (the network stays on the CPU, float64).
        name, labels: what the data are called and where the labels came from.

    Raises :class:`~deqlab.verification.inputs.InputError` (a ValueError) for unusable data and
    ValueError/TypeError for a bad argument, each naming it.
    """
    check = check_for(model)
    seed = check_int("seed", seed, min_value=0)
    train = check_int("train", train, min_value=0)
    eta = None if eta is None else check_positive("eta", eta)
    target_loss = None if target_loss is None else check_positive("target_loss", target_loss)
    device = check_device(device)
    n, d = _shape(X)
    check_memory(check, n, d, train=train, subject="`X`", device=device)
    sample = draw_subsample(check, n, d, seed=seed, device=device)
    inputs = prepare(
        X, y, name=name, normalize=normalize, standardize=standardize, labels=labels, sample=sample
    )
    found = run_check(
        check, inputs, seed=seed, train=train, eta=eta, progress=progress, device=device
    )
    settings = {
        "model": check.model,
        **vars(check),
        "device": device,
        "seed": seed,
        "train": train,
        "eta": eta,
        "target_loss": target_loss,
    }
    settings.setdefault("width", inputs.d)  # the DELM's width is d
    stand_ins = standins(found.numbers, found.training, target_loss)
    return Verification(
        check.model,
        inputs.summary(),
        settings,
        found.numbers,
        found.training,
        found.statements,
        found.answers,
        stand_ins,
        found.init,
        found.run,
    )


def _shape(X: object) -> tuple[int, int]:
    """(n, d) of an (n, d) array-like without copying it; (0, 0) when it is not 2-D (the
    data checks then say what is wrong)."""
    shape = tuple(getattr(X, "shape", None) or np.shape(X))
    return (int(shape[0]), int(shape[1])) if len(shape) == 2 else (0, 0)
