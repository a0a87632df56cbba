"""The peak-memory instrument against allocations whose sizes are known."""

from __future__ import annotations

import torch

import minitransformer as mt
from minitransformer.instruments.memory import PeakLiveBytes, peak_bytes


def test_counts_what_is_alive_at_once_not_the_sum():
    def one_after_the_other():
        a = torch.empty(1000)  # 4,000 bytes
        del a
        torch.empty(500)  # 2,000 bytes, after the first is freed

    def both_alive():
        a, b = torch.empty(1000), torch.empty(500)
        return a, b

    assert peak_bytes(one_after_the_other) == 4000
    assert peak_bytes(both_alive) == 6000


def test_arguments_and_their_views_do_not_count_new_results_do():
    x = torch.randn(10, 10)
    assert peak_bytes(lambda t: t.t()[2:], x) == 0  # views of the argument
    assert peak_bytes(lambda t: t.t().contiguous(), x) == 400  # a copy: 100 floats
    with PeakLiveBytes() as counter:
        y = torch.ones(3, dtype=torch.float64)
    assert counter.peak == counter.live == 24
    del y


def test_full_attention_holds_the_length_squared_blocks_do_not():
    peaks = {}
    for n in (128, 256):
        q, k, v = (torch.randn(1, 2, n, 16) for _ in range(3))
        with torch.no_grad():
            peaks[n] = (peak_bytes(mt.scaled_dot_product_attention, q, k, v),
                        peak_bytes(mt.flash_attention, q, k, v, block_size=32))
    score_matrix = 2 * 256 * 256 * 4  # (1, 2, 256, 256) float32
    assert peaks[256][0] >= score_matrix  # at least the scores exist at once
    assert peaks[256][0] / peaks[128][0] > 3.5  # grows with the square of the length
    assert peaks[256][1] / peaks[128][1] < 2.5  # grows with the length
    assert peaks[256][1] < score_matrix  # less than one matrix of scores
