"""experiments/kawaguchi2021/trajectory.py: the log-spaced steps a trajectory records."""

from deqlab.experiments.kawaguchi2021.trajectory import log_spaced_steps


def test_log_spaced_steps():
    assert log_spaced_steps(1000, 4) == [0, 1, 10, 100, 1000]
    assert log_spaced_steps(0, 5) == [0]
