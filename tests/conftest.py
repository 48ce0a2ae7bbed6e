"""Test defaults: float64 everywhere (docs/architecture.md), deterministic seeds, and one
intra-op thread.

The tests solve many small problems, where torch's threads mostly wait on each other:
beside other jobs on a loaded machine the suite then takes several times its CPU time
(issue 25). Every test runs with one intra-op thread; a test that measures threading asks
for more with ``@pytest.mark.threads(n)`` (``@pytest.mark.threads`` alone: torch's default
for this machine), and the count is set back to one after it.
"""

import pytest
import torch

torch.set_default_dtype(torch.float64)

#: torch's own intra-op thread count on this machine (before the tests set one).
DEFAULT_THREADS = torch.get_num_threads()
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
