"""Paper versus run: every config field declared, and the deviations a run shows."""

from dataclasses import dataclass

import pytest

from deqlab.experiments.deviations import (
    deviations,
    measurement,
    not_given,
    one_line,
    paper,
)


@dataclass(frozen=True)
class _Config:
    dataset: str = "digits"
    n: int = 1000
    eta: float = 0.5
    metrics_every: int = 10


def test_deviations_list_substitutions_changes_and_our_choices():
    setting = {
        "dataset": paper("mnist", "Section 5", substitute=True),
        "n": paper(1000, "Section 5"),
        "eta": not_given("Section 5 gives no step size"),
        "metrics_every": measurement(),
    }
    found = deviations(_Config(), setting)
    assert [(d.setting, d.paper, d.run, d.kind) for d in found] == [
        ("dataset", "mnist", "digits", "substitution"),
        ("eta", "not given", "0.5", "our choice"),
    ]
    assert [d.kind for d in deviations(_Config(n=200), setting)][1] == "changed"
    assert one_line(found) == (
        "1 setting differs from the paper: dataset digits (paper: mnist); "
        "our choice where the paper gives none: eta"
    )
    assert one_line([]) == "no deviations from the paper's setting"
    assert one_line(found[1:]) == "our choice where the paper gives none: eta"
    assert one_line(deviations(_Config(dataset="mnist", n=200), setting)).startswith(
        "1 setting differs from the paper: n 200 (paper: 1000); our choice"
    )


def test_every_config_field_must_be_declared():
    with pytest.raises(TypeError, match=r"undeclared: \['metrics_every'\], not fields: \['m'\]"):
        deviations(
            _Config(),
            {
                "dataset": measurement(),
                "n": measurement(),
                "eta": measurement(),
                "m": measurement(),
            },
        )
