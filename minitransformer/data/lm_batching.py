"""Batches for language models: the next-token shift, and BERT's masking.

- :func:`make_lm_batch` pads sequences into an :class:`LMBatch` with the
  shift a next-token model is trained with, done here and nowhere else:
  ``inputs = tokens[:-1]``, ``targets = tokens[1:]``, where each row's tokens
  are ``prefix + [BOS] + continuation + [EOS]``. The targets inside the
  prefix are :data:`IGNORE_ID` (no loss): a plain language model has an
  empty prefix; translation as language modelling puts the German sentence
  there and is trained on the English part only.
- :func:`mask_tokens` is BERT's rule (Devlin et al. 2019, §3.1): choose 15%
  of the ordinary tokens; of those, 80% become ``mask_id``, 10% a random
  token, 10% stay; the labels are the original tokens at the chosen
  positions and :data:`IGNORE_ID` elsewhere.
- :class:`LMBatcher` packs examples under a token budget as
  :class:`~minitransformer.data.TokenBatcher` does, and with ``masking``
  applies :func:`mask_tokens` afresh to every batch (reproducibly).

Shape letters: ``B`` batch, ``L`` length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..checks import check_int_at_least, check_positive_int
from .batching import TokenBatcher
from .vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

__all__ = ["IGNORE_ID", "LMBatch", "make_lm_batch", "mask_tokens", "LMBatcher"]

#: Target id that counts for nothing in the loss (``F.cross_entropy``'s ``ignore_index``).
IGNORE_ID = -100


@dataclass
class LMBatch:
    """One padded batch for a language model.

    Attributes:
        inputs: ``(B, L)`` int64 token ids, right-padded with ``pad_id``.
        targets: ``(B, L)`` int64: what each position is trained to predict;
            :data:`IGNORE_ID` or ``pad_id`` where nothing is (padding, a
            prompt, an unmasked position).
        pad_id: the padding id used.
    """

    inputs: Tensor
    targets: Tensor
    pad_id: int = PAD_ID

    def __len__(self) -> int:
        return self.inputs.shape[0]

    @property
    def num_target_tokens(self) -> int:
        """Positions the loss is averaged over."""
        return int(((self.targets != self.pad_id) & (self.targets >= 0)).sum())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LMBatch:
        """A copy of the batch on ``device``."""
        return LMBatch(self.inputs.to(device, non_blocking=non_blocking),
                       self.targets.to(device, non_blocking=non_blocking), self.pad_id)


Example = tuple[Sequence[int], Sequence[int]]


def _as_example(example: Any, index: int) -> tuple[list[int], list[int]]:
    """``(prefix, continuation)`` of an example: a pair, or one sequence (no prefix)."""
    if isinstance(example, (tuple, list)) and len(example) == 2 and all(
        isinstance(part, (tuple, list)) for part in example
    ):
        return list(example[0]), list(example[1])
    if isinstance(example, (tuple, list)) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in example
    ):
        return [], list(example)
    raise TypeError(f"make_lm_batch: example {index} must be a list of ids or a "
                    f"(prefix ids, continuation ids) pair, got {str(example)[:80]}")


def make_lm_batch(
    examples: Sequence[Sequence[int] | Example],
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> LMBatch:
    """Pad examples into an :class:`LMBatch` for next-token training.

    Args:
        examples: each a list of ids (a sentence, without BOS/EOS), or a
            ``(prefix, continuation)`` pair of them.

    Returns: an :class:`LMBatch` whose row is ``prefix + [BOS] + continuation``
    as inputs and ``[IGNORE] * len(prefix) + continuation + [EOS]`` as targets
    (position ``t`` predicts token ``t + 1``), padded to the longest row, so
    ``L = max(len(prefix) + len(continuation)) + 1``. With no prefix these
    are :func:`~minitransformer.data.make_batch`'s ``tgt_in`` and ``tgt_out``.
    """
    if len(examples) == 0:
        raise ValueError("make_lm_batch: got no examples")
    rows = [_as_example(ex, i) for i, ex in enumerate(examples)]
    length = max(len(p) + len(c) for p, c in rows) + 1
    inputs, targets = [], []
    for prefix, cont in rows:
        tokens = prefix + [bos_id] + cont + [eos_id]  # the shift, once
        pad = [pad_id] * (length + 1 - len(tokens))
        inputs.append(tokens[:-1] + pad)
        targets.append([IGNORE_ID] * len(prefix) + tokens[len(prefix) + 1:] + pad)
    return LMBatch(torch.tensor(inputs, dtype=torch.long),
                   torch.tensor(targets, dtype=torch.long), pad_id)


def mask_tokens(
    tokens: Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    p: float = 0.15,
    generator: torch.Generator | None = None,
    special_ids: Sequence[int] = (PAD_ID, BOS_ID, EOS_ID, UNK_ID),
) -> tuple[Tensor, Tensor]:
    """BERT's masking: the inputs and labels of one masked-LM batch.

    Each ordinary token (not in ``special_ids``, not ``mask_id``) is chosen
    with probability ``p``. A chosen token becomes ``mask_id`` with
    probability 0.8, a random ordinary token of ``[0, vocab_size)`` with
    probability 0.1, and stays itself with probability 0.1 (so the model
    cannot tell which visible tokens it will be asked about).

    Args:
        tokens: ``(B, L)`` int64 ids (padding and BOS/EOS included).
        mask_id: the id of the mask token (may lie outside ``[0, vocab_size)``).
        vocab_size: random replacements are drawn from the ordinary ids below it.
        p: the probability that a token is chosen, in ``(0, 1]``.
        generator: the random source (a fixed one gives the same masking).
        special_ids: ids never chosen (default: padding, BOS, EOS, unknown).

    Returns: ``(inputs, labels)``, both ``(B, L)``: ``inputs`` with the chosen
    tokens replaced, ``labels`` the original token where chosen and
    :data:`IGNORE_ID` elsewhere. ``tokens`` is not modified.
    """
    where = "mask_tokens"
    if not isinstance(tokens, Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"{where}: tokens must be a (B, L) tensor of integer ids, got "
                         f"{getattr(tokens, 'dtype', type(tokens).__name__)} "
                         f"{tuple(getattr(tokens, 'shape', ()))}")
    check_int_at_least(mask_id, 0, "mask_id", where)
    check_positive_int(vocab_size, "vocab_size", where)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"{where}: p must be in (0, 1], got {p!r}")
    excluded = torch.tensor(sorted({*special_ids, mask_id}), device=tokens.device)
    ordinary_ids = torch.ones(vocab_size, dtype=torch.bool, device=tokens.device)
    ordinary_ids[excluded[excluded < vocab_size]] = False
    pool = ordinary_ids.nonzero().squeeze(1)  # ids a random replacement may take
    if pool.numel() == 0:
        raise ValueError(f"{where}: no ordinary id below vocab_size={vocab_size} to draw from")

    def uniform() -> Tensor:
        return torch.rand(tokens.shape, generator=generator, device=tokens.device)

    ordinary = ~torch.isin(tokens, excluded)
    chosen = (uniform() < p) & ordinary
    roll = uniform()
    to_mask = chosen & (roll < 0.8)
    to_random = chosen & (roll >= 0.8) & (roll < 0.9)
    draws = torch.randint(len(pool), tokens.shape, generator=generator, device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(to_random, pool[draws], inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_ID))
    return inputs, labels


class LMBatcher(TokenBatcher):
    """Re-iterable :class:`LMBatch` batches of similar-length examples under a
    token budget: :class:`~minitransformer.data.TokenBatcher`'s sorting,
    packing and reproducible shuffling, with :func:`make_lm_batch` as the
    collation.

    Args:
        examples: sentences (lists of ids, no BOS/EOS) or ``(prefix,
            continuation)`` pairs (see :func:`make_lm_batch`).
        max_tokens: budget of padded tokens per batch, ``B * L <= max_tokens``
            (about; an example longer than it forms a batch alone).
        shuffle, seed: as for ``TokenBatcher``.
        masking: ``None`` for next-token batches; for masked-LM batches, the
            keywords of :func:`mask_tokens` (``mask_id``, ``vocab_size``, ``p``...):
            each batch is then ``tokens = [BOS] + sentence + [EOS]`` with
            inputs and labels from :func:`mask_tokens` (``special_ids``, by
            default the unknown id, always with this batcher's padding, BOS
            and EOS ids), drawn from a generator
            seeded by ``(seed, epoch, batch)`` (by ``(seed, batch)`` when not
            shuffling, so evaluation batches are the same every time).
        pad_id, bos_id, eos_id: the special ids.
    """

    def __init__(
        self,
        examples: Sequence[Sequence[int] | Example],
        max_tokens: int = 2048,
        shuffle: bool = True,
        seed: int = 0,
        masking: dict[str, Any] | None = None,
        pad_id: int = PAD_ID,
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
    ):
        pairs = [_as_example(ex, i) for i, ex in enumerate(examples)]
        # TokenBatcher packs so that B * (S + T + 1) <= max_tokens, with S the
        # longest prefix and T the longest continuation: a bound on B * L here.
        super().__init__(pairs, max_tokens, shuffle, seed, pad_id, bos_id, eos_id)
        if masking is not None:
            mask_tokens(torch.zeros(1, 1, dtype=torch.long), **masking)  # checks the keywords
            # A masked row also holds its final EOS (L + 1 tokens): pack it one longer.
            self._lengths = [(s + 1, t) for s, t in self._lengths]
            self._sizes = self._pack(sorted(self._lengths))
        self.masking = masking

    def _generate(self, batches: list[list[int]]) -> Iterator[LMBatch]:
        # Read the epoch now, as iter() counts it, not when the first batch is asked for.
        return self._batches(batches, self.epoch - 1 if self.shuffle else 0)

    def _batches(self, batches: list[list[int]], epoch: int) -> Iterator[LMBatch]:
        for number, idx in enumerate(batches):
            batch = make_lm_batch([self.examples[i] for i in idx], self.pad_id, self.bos_id,
                                  self.eos_id)
            if self.masking is not None:
                batch = self._masked(batch, epoch, number)
            yield batch

    def _masked(self, batch: LMBatch, epoch: int, number: int) -> LMBatch:
        """``[BOS] + sentence + [EOS]`` of each row, masked by :func:`mask_tokens`."""
        last = batch.targets[:, -1:]
        tokens = torch.cat([batch.inputs, torch.full_like(last, self.pad_id)], 1)
        ends = (batch.targets == self.eos_id).nonzero()
        tokens[ends[:, 0], ends[:, 1] + 1] = self.eos_id  # (B, L + 1)
        generator = torch.Generator().manual_seed(
            (self.seed * 1_000_003 + epoch) * 1_000_003 + number)
        # this batcher's padding, BOS and EOS are never chosen, whatever their ids
        given = self.masking.get("special_ids", (UNK_ID,))
        options = {**self.masking, "special_ids": (*given, self.pad_id, self.bos_id, self.eos_id)}
        inputs, labels = mask_tokens(tokens, generator=generator, **options)
        return LMBatch(inputs, labels, self.pad_id)
