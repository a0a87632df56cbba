"""Shared test settings: deterministic, single-threaded where it matters."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
