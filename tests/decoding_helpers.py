"""What the decoding tests of several files assert (imported as
``from decoding_helpers import ...``, as ``exercise_helpers`` is)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def assert_incremental_matches_full(
    model: nn.Module, src: Tensor, tgt: Tensor, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """The IncrementalDecoder contract: feeding ``tgt`` ``(B, T)`` one token at
    a time gives the logits of ``model.decode`` on the whole prefix at every step."""
    with torch.no_grad():
        mask = model.src_mask(src)
        memory = model.encode(src, mask)
        full = model.decode(tgt, memory, mask)  # (B, T, V)
        state = model.start_decoding(memory, mask)
        for t in range(tgt.shape[1]):
            logits, state = model.decode_next(tgt[:, t], state)
            torch.testing.assert_close(logits, full[:, t], atol=atol, rtol=rtol)
