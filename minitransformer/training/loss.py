"""The training objective, and the validation loss and accuracy.

Label smoothing (Szegedy et al. 2016, used by Vaswani et al. 2017 with
ε_ls = 0.1), the plain cross-entropy of a model on held-out batches, and
the share of their target tokens it predicts right.

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``V`` target vocabulary size.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from . import distributed as dist_utils
from .device import autocast_for

__all__ = [
    "label_smoothed_cross_entropy",
    "loss_sum",
    "evaluate_loss",
    "evaluate_accuracy",
    "batch_parts",
    "input_tokens",
    "pad_id_of",
]


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float = 0.1, pad_id: int = 0
) -> Tensor:
    """Mean label-smoothed cross-entropy over the non-pad target tokens.

    The smoothed target puts ``1 - ε + ε/V`` on the true token and ``ε/V`` on
    every other one (the convention of ``F.cross_entropy(label_smoothing=ε)``),
    so the loss is ``(1 - ε)·(−log p_true) + ε·mean_v(−log p_v)``.

    Args:
        logits: ``(B, T, V)`` unnormalised scores.
        target: ``(B, T)`` token ids; positions equal to ``pad_id`` or negative
            (:data:`~minitransformer.data.IGNORE_ID`) count for nothing.
        smoothing: ε in [0, 1).
        pad_id: the padding id.

    Returns: a scalar tensor (0 if there is no non-pad token).
    """
    total, count = loss_sum(logits, target, smoothing, pad_id)
    return total / count.clamp(min=1)


def loss_sum(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """``(sum of the smoothed loss over the non-pad tokens, number of them)``: the
    two parts of :func:`label_smoothed_cross_entropy`, kept apart so that a
    batch split across processes can be averaged over all of its tokens."""
    if logits.dim() != 3 or target.shape != logits.shape[:2]:
        raise ValueError(
            f"label_smoothed_cross_entropy: expected logits (B, T, V) and target (B, T), "
            f"got {tuple(logits.shape)} and {tuple(target.shape)}"
        )
    logp = logits.float().log_softmax(dim=-1)  # (B, T, V)
    keep = (target != pad_id) & (target >= 0)  # (B, T): IGNORE_ID (-100) counts for nothing
    nll = -logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    loss = nll if smoothing == 0 else (1 - smoothing) * nll - smoothing * logp.mean(dim=-1)
    return loss.masked_fill(~keep, 0.0).sum(), keep.sum()



def batch_parts(batch: Any) -> tuple[tuple[Tensor, ...], Tensor]:
    """``(the model's inputs, the targets (B, T))`` of a batch.

    - a seq2seq batch (:class:`~minitransformer.data.Batch` or a
      ``(src, tgt_in, tgt_out)`` tuple): ``((src, tgt_in), tgt_out)``, the
      model called as ``model(src, tgt_in)``;
    - a language-model batch (:class:`~minitransformer.data.LMBatch` or an
      ``(inputs, targets)`` tuple): ``((inputs,), targets)``, the model called
      as ``model(inputs)``.
    """
    if isinstance(batch, (tuple, list)) and len(batch) in (2, 3):
        return tuple(batch[:-1]), batch[-1]
    if hasattr(batch, "inputs") and hasattr(batch, "targets"):
        return (batch.inputs,), batch.targets
    try:
        return (batch.src, batch.tgt_in), batch.tgt_out
    except AttributeError:
        raise TypeError(
            "fit: each batch must be a minitransformer.data.Batch (src, tgt_in, tgt_out), "
            "a minitransformer.data.LMBatch (inputs, targets), or a tuple of those tensors, "
            f"got {type(batch).__name__}"
        ) from None


def input_tokens(inputs: tuple[Tensor, ...], counted: Tensor, pad_id: int) -> int:
    """Tokens a step processed, for tokens/s: the targets counted by the loss,
    plus a seq2seq model's non-pad source tokens (a language model's inputs
    are its targets shifted, so they count once)."""
    tokens = int(counted)
    if len(inputs) == 2:
        tokens += int((inputs[0] != pad_id).sum())
    return tokens


def pad_id_of(model: nn.Module, pad_id: int | None) -> int:
    """``pad_id`` if given, else the model config's ``pad_id`` (0 without a config)."""
    if pad_id is not None:
        return pad_id
    return getattr(getattr(model, "config", None), "pad_id", 0)



@torch.no_grad()
def evaluate_loss(
    model: nn.Module,
    batches: Iterable,
    pad_id: int | None = None,
    device: torch.device | str | None = None,
    amp: str = "off",
) -> float:
    """Mean cross-entropy (no label smoothing, nats per target token) over
    ``batches`` (seq2seq or language-model batches, see :func:`batch_parts`);
    ``exp`` of it is the perplexity. Under ``torchrun`` each
    process evaluates its share and the sums are combined."""
    inner = getattr(model, "module", model)
    pad = pad_id_of(inner, pad_id)
    device = torch.device(device) if device is not None else next(inner.parameters()).device
    cast = autocast_for(device, amp)
    was_training = inner.training
    inner.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    rank, world = dist_utils.rank_and_world()
    for i, batch in enumerate(batches):
        if i % world != rank:
            continue
        inputs, target = batch_parts(batch)
        with cast():
            logits = inner(*(t.to(device) for t in inputs))
        summed, count = loss_sum(logits, target.to(device), 0.0, pad)
        total += torch.stack([summed.double(), count.double()])
    dist_utils.all_reduce_sum(total)
    inner.train(was_training)
    return float(total[0] / total[1].clamp(min=1))


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    batches: Iterable,
    pad_id: int | None = None,
    device: torch.device | str | None = None,
) -> float:
    """Teacher-forced token accuracy over ``batches``: the share of the
    non-pad target tokens (end-of-sequence included) whose highest-scoring
    prediction is the target, every token counting once across the
    batches. The batches are those of :func:`evaluate_loss` (seq2seq or
    language-model, see :func:`batch_parts`); targets equal to ``pad_id``
    or negative (:data:`~minitransformer.data.IGNORE_ID`) are not counted.
    Under ``torchrun`` each process scores its share and the counts are
    combined. 0.0 when no token counts."""
    if hasattr(batches, "tgt_out") or hasattr(batches, "targets"):
        raise TypeError("evaluate_accuracy: expected an iterable of batches, got one "
                        f"{type(batches).__name__}; pass [batch]")
    inner = getattr(model, "module", model)
    pad = pad_id_of(inner, pad_id)
    device = torch.device(device) if device is not None else next(inner.parameters()).device
    was_training = inner.training
    inner.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # right, counted
    rank, world = dist_utils.rank_and_world()
    for i, batch in enumerate(batches):
        if i % world != rank:
            continue
        inputs, target = batch_parts(batch)
        target = target.to(device)
        pred = inner(*(t.to(device) for t in inputs)).argmax(-1)  # (B, T)
        keep = (target != pad) & (target >= 0)  # (B, T)
        total += torch.stack([((pred == target) & keep).sum().double(), keep.sum().double()])
    dist_utils.all_reduce_sum(total)
    inner.train(was_training)
    return float(total[0] / total[1].clamp(min=1))
