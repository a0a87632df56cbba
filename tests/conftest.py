"""Shared test settings: deterministic, single-threaded where it matters."""

import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


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


@pytest.fixture(scope="module")
def benchmarks_path():
    """``benchmarks/`` on ``sys.path`` for the module's tests, so that they can
    import its scripts (and the scripts their ``machine.py``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield BENCHMARKS
    finally:
        sys.path.remove(str(BENCHMARKS))
