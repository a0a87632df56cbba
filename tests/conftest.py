"""Shared test settings: deterministic, single-threaded where it matters."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """Run the test with one torch thread (for tiny models, where threads
    only add overhead), restoring the count afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
