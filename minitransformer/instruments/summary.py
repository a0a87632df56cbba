"""Summaries of a model: parameters per component, and the shape of every
intermediate tensor in one forward pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = [
    "count_parameters", "parameter_table", "ShapeRecord", "trace_shapes", "model_of",
    "matched_d_ff",
]


def count_parameters(module: nn.Module, trainable_only: bool = True) -> int:
    """Number of scalar parameters of ``module`` (a tied or shared tensor counts once)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"count_parameters: expected an nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def model_of(config) -> nn.Module:
    """The model a config describes, built on the meta device (no memory, no
    initialisation): a :class:`~minitransformer.Transformer` for a
    :class:`~minitransformer.TransformerConfig`, a
    :class:`~minitransformer.LanguageModel` for a
    :class:`~minitransformer.LanguageModelConfig`."""
    from ..lm.models import LanguageModel, LanguageModelConfig
    from ..model import Transformer, TransformerConfig

    kinds = {TransformerConfig: Transformer, LanguageModelConfig: LanguageModel}
    if type(config) not in kinds:
        raise TypeError(f"model_of: expected a TransformerConfig or LanguageModelConfig, "
                        f"got {type(config).__name__}")
    with torch.device("meta"):
        return kinds[type(config)](config)


def matched_d_ff(config, parameters: int) -> int:
    """The feed-forward width ``d_ff`` that brings the model of ``config``
    closest to ``parameters`` parameters, the other fields as they are.

    How the book compares parts at equal capacity: a part that saves weights
    (grouped key/value heads, no biases) gives them back to the feed-forward
    networks. The count is linear in the hidden width (``d_ff``, or SwiGLU's
    ``round(2·d_ff/3)``), so two builds find the line; the neighbours of its
    root are then counted exactly, and the smallest of the closest is
    returned. ``config``: a :class:`~minitransformer.TransformerConfig` or
    :class:`~minitransformer.LanguageModelConfig`."""
    import dataclasses

    def count(d_ff: int) -> int:
        return count_parameters(model_of(dataclasses.replace(config, d_ff=d_ff)))

    if not isinstance(parameters, int) or parameters < 1:
        raise ValueError(f"matched_d_ff: parameters must be a positive int, got {parameters!r}")
    low, high = 64, 4096
    per_unit = (count(high) - count(low)) / (high - low)
    guess = max(1, round(low + (parameters - count(low)) / per_unit))
    candidates = range(max(1, guess - 3), guess + 4)
    return min(candidates, key=lambda d: (abs(count(d) - parameters), d))


def parameter_table(model: nn.Module, depth: int = 1) -> list[tuple[str, str, int]]:
    """``(name, class name, parameters)`` of each submodule down to ``depth``
    levels, in registration order. A weight shared between two submodules is
    counted in the first one only, so the rows add up to
    :func:`count_parameters` of ``model``."""
    if depth < 1:
        raise ValueError(f"parameter_table: depth must be >= 1, got {depth}")
    seen: set[int] = set()
    rows = []

    def visit(module: nn.Module, prefix: str, level: int) -> None:
        for name, child in module.named_children():
            full = f"{prefix}{name}"
            if level < depth and any(True for _ in child.children()):
                visit(child, full + ".", level + 1)
                continue
            n = 0
            for p in child.parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    n += p.numel()
            rows.append((full, type(child).__name__, n))

    visit(model, "", 1)
    return rows


@dataclass
class ShapeRecord:
    """One module call: its name, class and output shape."""

    name: str
    kind: str
    shape: tuple[int, ...]


def trace_shapes(model: nn.Module, *inputs: Tensor, max_depth: int = 3) -> list[ShapeRecord]:
    """Run ``model(*inputs)`` once (no gradients) and record, in call order,
    the output shape of every submodule at most ``max_depth`` levels deep.
    For modules that return a tuple (attention: ``(output, weights)``) the
    first element's shape is recorded."""
    records: list[ShapeRecord] = []
    handles = []
    for name, module in model.named_modules():
        if not name or name.count(".") >= max_depth:
            continue

        def hook(mod, args, output, name=name):
            out = output[0] if isinstance(output, tuple) else output
            if isinstance(out, Tensor):
                records.append(ShapeRecord(name, type(mod).__name__, tuple(out.shape)))

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return records
