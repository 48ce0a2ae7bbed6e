"""Test defaults: float64 everywhere (docs/architecture.md), deterministic seeds, and one
intra-op thread.

The tests solve many small problems, where torch's threads mostly wait on each other:
beside other jobs on a loaded machine the suite then takes several times its CPU time
(issue 25). Every test runs with one intra-op thread; a test that measures threading asks
for more with ``@pytest.mark.threads(n)`` (``@pytest.mark.threads`` alone: torch's default
for this machine), and the count is set back to one after it.
"""

import os

# Processes a test starts (a run killed and resumed, a CLI call) inherit the same one thread
# (torch, MKL, OpenBLAS): their numbers then agree to the last bit with the test's own, as the
# resume tests require (a thread count changes the order of floating-point sums).
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_default_dtype(torch.float64)

#: The machine's thread count, torch's own default (the environment above sets one).
DEFAULT_THREADS = len(os.sched_getaffinity(0))
torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "threads(n): run the test with n intra-op torch threads (default: torch's own count) "
        "instead of the suite's one",
    )


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _threads(request):
    """One intra-op thread, or what the test's ``threads`` marker asks for."""
    marker = request.node.get_closest_marker("threads")
    threads = 1 if marker is None else (marker.args[0] if marker.args else DEFAULT_THREADS)
    torch.set_num_threads(threads)
    yield
    torch.set_num_threads(1)
