"""A DEQ from a plain config, dict or TOML (issue 31): the settings round-trip, a layer built
from a config solves as the one built by hand (float64, the closed form of a linear cell),
unknown keys are errors; and the eval-time iteration budget."""

import pytest
import torch

from deqlab import DEQ, Anderson, Implicit, Phantom, Picard
from deqlab.implicit import TRAINING_BACKWARD, TRAINING_SOLVER

D = 4
TOML = """
on_failure = "record"
eval_factor = 2.0

[solver]
name = "anderson"
tol = 1e-11
max_iter = 60
history = 4

[backward]
name = "implicit"
init = "grad"

[backward.solver]
name = "picard"
tol = 1e-12
max_iter = 500
"""


def cell(z, x):
    return 0.5 * torch.tanh(z) + x


def test_a_toml_file_builds_the_layer_it_describes(tmp_path):
    path = tmp_path / "deq.toml"
    path.write_text(TOML)
    deq = DEQ.from_config(cell, path)
    assert deq.solver == Anderson(tol=1e-11, max_iter=60, history=4)
    assert deq.backward == Implicit(solver=Picard(tol=1e-12, max_iter=500), init="grad")
    assert deq.on_failure.value == "record" and deq.eval_factor == 2.0
    by_hand = DEQ(cell, solver=deq.solver, backward=deq.backward, on_failure="record")
    x = torch.randn(3, D, dtype=torch.float64)
    torch.testing.assert_close(deq(x), by_hand(x), rtol=0, atol=0)
    z = deq(x).detach()
    torch.testing.assert_close(z, cell(z, x), rtol=0, atol=1e-10)  # a fixed point


def test_the_settings_round_trip_and_defaults_fill_the_rest():
    deq = DEQ(cell, backward=Phantom(3, 0.8), eval_max_iter=100)
    again = DEQ.from_config(cell, deq.config())
    assert again.config() == deq.config()
    assert (again.solver, again.backward, again.eval_max_iter) == (deq.solver, Phantom(3, 0.8), 100)
    default = DEQ.from_config(cell, {"solver": {"tol": 1e-4}})  # amends the default solver
    assert default.solver == Anderson(**{**TRAINING_SOLVER.__dict__, "tol": 1e-4})
    assert default.backward == TRAINING_BACKWARD


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"tolerance": 1e-3}, ValueError, r"unknown key\(s\) 'tolerance' in the DEQ config; valid"),
        ({"solver": {"name": "anderson", "tole": 1}}, ValueError, r"\[solver\]: unknown opt"),
        ({"solver": {"tole": 1}}, ValueError, r"unknown key\(s\) 'tole' in \[solver\]"),
        ({"backward": {"name": "phantom", "step": 2}}, ValueError, r"'step' in \[backward\]"),
        ({"backward": {"steps": 2}}, ValueError, r"\[backward\] needs a name, one of"),
        ({"solver": 3}, TypeError, r"\[solver\] must be a table \(or a name\); got int"),
        (3, TypeError, r"`config` must be a mapping or the path of a TOML file; got int"),
    ],
)
def test_unknown_keys_are_errors_that_name_them(config, error, match):
    with pytest.raises(error, match=match):
        DEQ.from_config(cell, config)


def test_a_toml_that_does_not_parse_names_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[solver\nname = 1")
    with pytest.raises(ValueError, match=r"bad.toml: not valid TOML"):
        DEQ.from_config(cell, path)


def test_the_eval_budget_is_the_factor_times_the_cap():
    # f(z) = z + 1 has no fixed point: every solve runs its whole budget
    deq = DEQ(lambda z, x: z + x, solver=Picard(max_iter=10), eval_factor=2.5, on_failure="record")
    x = torch.ones(2, D, dtype=torch.float64)
    deq(x)
    assert deq.last_forward.n_steps == 10
    deq.eval()
    deq(x)
    assert deq.last_forward.n_steps == 25  # int(10 × 2.5), as torchdeq's eval_factor
    deq.eval_max_iter = 7
    deq(x)
    assert deq.last_forward.n_steps == 7
    with pytest.raises(ValueError, match=r"`eval_factor` must be in \(0, inf\); got 0"):
        DEQ(cell, eval_factor=0.0)
