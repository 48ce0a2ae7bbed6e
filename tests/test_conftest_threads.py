"""The suite's thread policy (tests/conftest.py): one intra-op thread unless asked."""

import subprocess
import sys

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


def test_a_process_a_test_starts_computes_with_one_thread_too():
    """A run killed and resumed in a child process must add floats in the test's order."""
    code = "import torch; print(torch.get_num_threads())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"
