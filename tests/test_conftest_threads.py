"""The suite's thread policy (tests/conftest.py): one intra-op thread unless asked."""

import pytest
import torch

from conftest import DEFAULT_THREADS


def test_a_test_runs_with_one_intra_op_thread():
    assert torch.get_num_threads() == 1


@pytest.mark.threads(2)
def test_a_test_that_measures_threading_asks_for_its_count():
    assert torch.get_num_threads() == 2


@pytest.mark.threads
def test_the_bare_marker_gives_torchs_own_count():
    assert torch.get_num_threads() == DEFAULT_THREADS


def test_the_count_is_one_again_after_a_marked_test():
    assert torch.get_num_threads() == 1
