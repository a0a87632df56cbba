"""Additive segment (or language) embeddings.

Besides its position, a token can carry other facts that the model should
see: which sentence of a pair it belongs to (BERT's "segment" embeddings,
Devlin et al. 2019) or which language it is written in (XLM's "language"
embeddings, Lample and Conneau 2019). As with positional encodings
(Vaswani et al. 2017, section 3.5), the cheapest way is to *add* one
learned vector per segment to the token embedding.

Shape letters: ``B`` batch, ``L`` length, ``D`` model width, ``G`` number of
segments.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..checks import check_positive_int, check_sequence, check_token_range, check_tokens

__all__ = ["SegmentEmbedding"]


class SegmentEmbedding(nn.Module):
    """Add a learned vector for each token's segment id.

    Args:
        num_segments: number of segments or languages ``G``.
        d_model: embedding width ``D``.

    The table is ``self.embedding.weight``, ``(G, D)``, initialised N(0, 1).
    Adding ``embedding[g]`` equals concatenating a one-hot code of ``g`` to
    the token's features and applying a linear layer to the result.
    """

    def __init__(self, num_segments: int, d_model: int):
        super().__init__()
        for name, value in (("num_segments", num_segments), ("d_model", d_model)):
            check_positive_int(value, name, type(self).__name__)
        self.num_segments = num_segments
        self.d_model = d_model
        self.embedding = nn.Embedding(num_segments, d_model)

    def forward(self, x: Tensor, segment_ids: Tensor) -> Tensor:
        """``x`` ``(B, L, D)`` and integer ``segment_ids`` ``(B, L)`` → ``(B, L, D)``."""
        where = type(self).__name__
        check_sequence(x, self.d_model, where, "x")
        check_tokens(segment_ids, "segment_ids", where)
        if segment_ids.shape != x.shape[:2]:
            raise ValueError(
                f"{where}: segment_ids must have shape {tuple(x.shape[:2])} (batch, len), "
                f"got {tuple(segment_ids.shape)}"
            )
        check_token_range(segment_ids, self.num_segments, "segment_ids", where, "the segments")
        return x + self.embedding(segment_ids)  # (B, L, D)
