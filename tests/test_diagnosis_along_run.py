"""DiagnosticsRecorder: the diagnostics along a training run, in a table; its cost bounded;
the rate followed where the gradient is exact; the pages of a run and of a diagnosis
rendered in a real headless browser."""

import math
import time

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, DiagnosticsRecorder, Implicit, diagnose
from deqlab.diagnosis.along_run import COLUMNS
from test_report_html import _run_chromium, chromium  # noqa: F401  (a fixture)


class TanhCell(nn.Module):
    def __init__(self, d: int = 6) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        with torch.no_grad():
            self.lin.weight.mul_(0.5)

    def forward(self, z, x):
        return torch.tanh(self.lin(z) + x)


def train(recorder_options: dict, steps: int = 7, backward=None, pause: float = 0.0, d: int = 6):
    torch.manual_seed(0)
    cell, head = TanhCell(d).double(), nn.Linear(d, 1).double()
    deq = DEQ(cell, solver=Anderson(tol=1e-8, max_iter=60, per_sample=True), backward=backward)
    X, y = torch.randn(8, d, dtype=torch.float64), torch.randn(8, 1, dtype=torch.float64)
    params = [*cell.parameters(), *head.parameters()]
    recorder = DiagnosticsRecorder(deq, **recorder_options)
    opt = torch.optim.SGD(params, lr=0.1)
    for _ in range(steps):
        loss = 0.5 * (head(deq(X)) - y).square().mean()
        opt.zero_grad()
        loss.backward()
        recorder.observe(loss, params)
        opt.step()
        time.sleep(pause)
    return recorder, deq


def test_records_every_k_steps_what_deq_diagnostics_reads_there():
    recorder, _ = train({"every": 3, "max_fraction": None})
    table = recorder.table()
    assert list(table.columns) == list(COLUMNS) and len(table) == 7
    assert table["norm_max"].notna().tolist() == [i % 3 == 0 for i in range(7)]
    assert (table["solver_steps"] > 0).all() and table["forward_converged"].all()
    for _, row in table.dropna(subset=["norm_max"]).iterrows():
        assert row["norm_lower"] <= row["norm_max"] <= row["norm_upper"]
        assert row["sigma_min_lower"] <= row["sigma_min"] <= row["sigma_min_upper"]
    assert "7 steps" in recorder.reading() and "of the training time" in recorder.reading()


def test_a_recording_is_deq_diagnostics_at_that_steps_equilibrium():
    torch.manual_seed(0)
    deq = DEQ(TanhCell().double(), solver=Anderson(tol=1e-8, per_sample=True))
    recorder = DiagnosticsRecorder(deq, every=2, max_fraction=None, seed=5)
    for _ in range(3):
        deq(torch.randn(4, 6, dtype=torch.float64))
        row = recorder.observe(0.0)
    seen = deq.diagnostics(generator=torch.Generator().manual_seed(5 + 2), max_iter=30)
    assert row["step"] == 2 and row["norm_max"] == float(seen.jacobian_norm.value.max())
    assert row["sigma_min"] == float(seen.sigma_min.value.min())
    assert row["rho_max"] == float(seen.spectral_radius.value.max())


def test_the_rate_is_followed_where_the_gradient_is_exact():
    exact, _ = train({"every": 0, "lr": 0.1}, backward=Implicit())
    table = exact.table()
    assert table["exact_gradient"].all() and table["pl_ratio"].notna().all()
    assert table["predicted"].notna().all()
    assert table["measured"][:-1].notna().all() and math.isnan(table["measured"].iloc[-1])
    loss = table["loss"].to_numpy()
    assert table["measured"].iloc[2] == pytest.approx(loss[3] / loss[2], rel=1e-12)
    phantom, _ = train({"every": 0, "lr": 0.1})  # the layer's default: approximate
    table = phantom.table()
    assert not table["exact_gradient"].any()
    assert table["pl_ratio"].isna().all() and table["predicted"].isna().all()


def test_the_cost_is_bounded_by_max_fraction():
    """Recordings of 64 Krylov steps on a 64-wide state against training steps of ~5 ms:
    unbounded, the recorder costs several times the training; bounded at 20%, it postpones
    and stays within 20% plus one recording's share."""
    options = {"every": 1, "max_iter": 64, "rtol": 1e-9}
    free, _ = train({**options, "max_fraction": None}, steps=12, pause=0.005, d=64)
    assert free.overhead() > 0.5 and free.postponed == 0
    bounded, _ = train({**options, "max_fraction": 0.2}, steps=40, pause=0.005, d=64)
    recorded = bounded.table()["diagnostics_seconds"].dropna()
    assert bounded.postponed > 0 and len(recorded) < 40
    assert bounded.overhead() <= 0.2 + recorded.max() / bounded.training_seconds + 0.02


def test_bad_use_is_one_clear_line():
    deq = DEQ(TanhCell())
    with pytest.raises(TypeError, match=r"`deq` must be a deqlab\.DEQ layer; got Linear"):
        DiagnosticsRecorder(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="`every` must be >= 0; got -1"):
        DiagnosticsRecorder(deq, every=-1)
    with pytest.raises(ValueError, match=r"`max_fraction` must be in \(0, inf\); got 0"):
        DiagnosticsRecorder(deq, max_fraction=0.0)
    with pytest.raises(RuntimeError, match=r"call deq\(x\) first"):
        DiagnosticsRecorder(deq).observe(1.0)
    deq(torch.randn(2, 6))
    with pytest.raises(ValueError, match="`params` must be given when the recorder follows"):
        DiagnosticsRecorder(deq, lr=0.1).observe(1.0)


def rendered(chromium: str, page, tmp_path) -> str:  # noqa: F811
    """The page's DOM after a headless Chromium loaded it; its screenshot is not blank."""
    mpimg = pytest.importorskip("matplotlib.image")
    shot, url = tmp_path / "page.png", page.resolve().as_uri()
    _run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1200,1400", url)
    rgb = mpimg.imread(shot)[..., :3]
    assert (rgb < 0.9).any(axis=-1).mean() > 0.03 and rgb.std() > 0.05
    return _run_chromium(chromium, tmp_path, "--dump-dom", url).stdout


def test_the_run_page_renders_in_headless_chromium(chromium, tmp_path):  # noqa: F811
    recorder, _ = train({"every": 2, "max_fraction": None})
    page = recorder.to_html(tmp_path / "run.html")
    assert recorder._repr_html_().count("data:image/png;base64,") == 1
    dom = rendered(chromium, page, tmp_path)
    assert dom.count('<img src="data:image/png;base64,') == 1
    assert "<th>sigma_min_lower</th>" in dom and "the recorder cost" in dom


def test_the_diagnosis_page_renders_in_headless_chromium(chromium, tmp_path):  # noqa: F811
    torch.manual_seed(0)
    deq = DEQ(TanhCell().double(), solver=Anderson(tol=1e-10))
    X, y = torch.randn(6, 6, dtype=torch.float64), torch.randn(6, 6, dtype=torch.float64)
    found = diagnose(deq, X, y, lr=0.1)
    page = found.to_html(tmp_path / "diagnosis.html")
    dom = rendered(chromium, page, tmp_path)
    assert dom.count('<img src="data:image/png;base64,') == 2
    assert "the NTK over cell.lin.weight, cell.lin.bias (P = 42)" in dom
    assert found._repr_html_().count("data:image/png;base64,") == 2
