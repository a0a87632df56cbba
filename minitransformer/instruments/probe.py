"""Look inside a model while it runs: record every attention map.

    with record_attention(model) as maps:
        model(src, tgt)
    maps["encoder.layers.0.self_attn"]   # (B, H, Lq, Lk)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import Tensor, nn

from ..attention import MultiHeadAttention

__all__ = ["record_attention"]


class AttentionMaps(dict):
    """``{module name: weights (B, H, Lq, Lk)}`` of the last forward pass,
    filled in when the ``with`` block ends (or on :meth:`refresh`)."""

    def __init__(self, modules: dict[str, MultiHeadAttention]):
        super().__init__()
        self._sources = modules

    def refresh(self) -> AttentionMaps:
        """Collect the latest weights now (inside the ``with`` block)."""
        for name, m in self._sources.items():
            if m.last_weights is not None:
                self[name] = m.last_weights
        return self


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, Tensor]]:
    """Within the block, every :class:`MultiHeadAttention` in ``model`` keeps
    the weights of its latest call (detached). Yields a dict that maps each
    module's name (as in ``model.named_modules()``) to those weights
    ``(B, H, Lq, Lk)``; it is complete once the block exits.
    """
    modules = {n: m for n, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    if not modules:
        raise ValueError(f"record_attention: {type(model).__name__} has no MultiHeadAttention")
    maps = AttentionMaps(modules)
    for m in modules.values():
        m.record_weights, m.last_weights = True, None
    try:
        yield maps
    finally:
        maps.refresh()
        for m in modules.values():
            m.record_weights, m.last_weights = False, None
