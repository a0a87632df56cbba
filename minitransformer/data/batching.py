"""Padded batches and token-budget batching by similar length.

Vaswani et al. (2017, §5.1): "Sentence pairs were batched together by
approximate sequence length. Each training batch contained a set of sentence
pairs containing approximately 25000 source tokens and 25000 target tokens."
:class:`TokenBatcher` does the same at a small scale: it sorts examples by
length and fills each batch until its *padded* size would exceed a token
budget, so short sentences come in big batches and long ones in small
batches, with little padding.

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length (target
+ 1 for the BOS/EOS shift).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .vocab import BOS_ID, EOS_ID, PAD_ID

__all__ = ["Batch", "make_batch", "TokenBatcher"]

Example = tuple[Sequence[int], Sequence[int]]


@dataclass
class Batch:
    """One padded batch of (source, target) pairs, ready for teacher forcing.

    Attributes:
        src: ``(B, S)`` int64 source ids, right-padded with ``pad_id``.
        tgt_in: ``(B, T)`` decoder input: BOS + target, padded.
        tgt_out: ``(B, T)`` decoder target: target + EOS, padded.
        pad_id: the padding id used.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    pad_id: int = PAD_ID

    @property
    def num_src_tokens(self) -> int:
        """Non-pad source tokens."""
        return int((self.src != self.pad_id).sum())

    @property
    def num_tgt_tokens(self) -> int:
        """Non-pad target tokens (the ones the loss is averaged over, EOS included)."""
        return int((self.tgt_out != self.pad_id).sum())

    def __len__(self) -> int:
        return self.src.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy of the batch on ``device``."""
        return Batch(
            self.src.to(device, non_blocking=non_blocking),
            self.tgt_in.to(device, non_blocking=non_blocking),
            self.tgt_out.to(device, non_blocking=non_blocking),
            self.pad_id,
        )


def _check_ids(ids: Sequence[int], what: str, index: int) -> None:
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise TypeError(f"make_batch: example {index} {what} must be a list of ints, got {ids!r}")


def make_batch(
    examples: Sequence[Example],
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Batch:
    """Pad a list of (source ids, target ids) pairs into a :class:`Batch`.

    Examples hold ids WITHOUT BOS/EOS; this function adds them:
    ``tgt_in = [bos] + tgt`` and ``tgt_out = tgt + [eos]``, so ``tgt_out[:, t]``
    is the token the decoder must predict after reading ``tgt_in[:, :t+1]``.

    Returns:
        A :class:`Batch` with ``src (B, S)``, ``tgt_in (B, T)``, ``tgt_out (B, T)``
        where ``S`` is the longest source and ``T`` the longest target + 1.
    """
    if len(examples) == 0:
        raise ValueError("make_batch: got no examples")
    srcs, tgts = [], []
    for i, ex in enumerate(examples):
        if not isinstance(ex, (tuple, list)) or len(ex) != 2:
            raise TypeError(
                f"make_batch: example {i} must be a (src_ids, tgt_ids) pair, got {ex!r}"
            )
        src, tgt = ex
        _check_ids(src, "source", i)
        _check_ids(tgt, "target", i)
        if len(src) == 0:
            raise ValueError(f"make_batch: example {i} has an empty source (nothing to attend to)")
        srcs.append(list(src))
        tgts.append(list(tgt))
    S = max(len(s) for s in srcs)
    T = max(len(t) for t in tgts) + 1
    # Pad in Python and convert once (much faster than filling row by row).
    src_rows = [s + [pad_id] * (S - len(s)) for s in srcs]
    in_rows = [[bos_id] + t + [pad_id] * (T - 1 - len(t)) for t in tgts]
    out_rows = [t + [eos_id] + [pad_id] * (T - 1 - len(t)) for t in tgts]
    return Batch(
        torch.tensor(src_rows, dtype=torch.long),  # (B, S)
        torch.tensor(in_rows, dtype=torch.long),  # (B, T)
        torch.tensor(out_rows, dtype=torch.long),  # (B, T)
        pad_id,
    )


class TokenBatcher:
    """Re-iterable batches of similar-length examples under a token budget.

    Each ``iter()`` is one epoch. Examples are sorted by (source length,
    target length), ties in a random order, then packed greedily: a batch of
    ``B`` examples with longest source ``S`` and longest target ``T - 1``
    holds at most ``max_tokens`` padded tokens, ``B * (S + T) <= max_tokens``
    (an example longer than the budget forms a batch alone). With
    ``shuffle=True`` the batch order and the ties are reshuffled each epoch
    from ``(seed, epoch)``, so a run is reproducible and can be resumed with
    :meth:`set_epoch`. The number of batches is the same every epoch.

    Args:
        examples: (source ids, target ids) pairs without BOS/EOS.
        max_tokens: budget of padded source + target tokens per batch.
        shuffle: reshuffle each epoch (training) or keep length order (evaluation).
        seed: base seed of the shuffles.
        pad_id, bos_id, eos_id: passed to :func:`make_batch`.
    """

    def __init__(
        self,
        examples: Sequence[Example],
        max_tokens: int = 2048,
        shuffle: bool = True,
        seed: int = 0,
        pad_id: int = PAD_ID,
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
    ):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"TokenBatcher: max_tokens must be a positive int, got {max_tokens!r}")
        if len(examples) == 0:
            raise ValueError("TokenBatcher: got no examples")
        self.examples = list(examples)
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.epoch = 0
        self._lengths = [(len(s), len(t)) for s, t in self.examples]
        # The packing depends only on the sorted length sequence, which ties do
        # not change: compute the batch sizes once.
        order = sorted(range(len(self.examples)), key=self._lengths.__getitem__)
        self._sizes = self._pack([self._lengths[i] for i in order])

    def _pack(self, lengths: list[tuple[int, int]]) -> list[int]:
        sizes: list[int] = []
        count = max_s = max_t = 0
        for s, t in lengths:
            new_s, new_t = max(max_s, s), max(max_t, t + 1)
            if count and (count + 1) * (new_s + new_t) > self.max_tokens:
                sizes.append(count)
                count, new_s, new_t = 0, s, t + 1
            count, max_s, max_t = count + 1, new_s, new_t
        if count:
            sizes.append(count)
        return sizes

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` produce epoch ``epoch`` (e.g. when resuming)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self._sizes)

    def batch_indices(self, epoch: int | None = None) -> list[list[int]]:
        """The example indices of each batch of ``epoch`` (default: the next one)."""
        epoch = self.epoch if epoch is None else epoch
        indices = list(range(len(self.examples)))
        rng = random.Random(self.seed * 1_000_003 + epoch)
        if self.shuffle:
            rng.shuffle(indices)  # random order of ties; sorted() below is stable
        indices.sort(key=self._lengths.__getitem__)
        batches, start = [], 0
        for size in self._sizes:
            batches.append(indices[start : start + size])
            start += size
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[Batch]:
        batches = self.batch_indices(self.epoch)
        self.epoch += 1  # at iter() time, not at the first next()
        return self._generate(batches)

    def _generate(self, batches: list[list[int]]) -> Iterator[Batch]:
        for idx in batches:
            yield make_batch(
                [self.examples[i] for i in idx], self.pad_id, self.bos_id, self.eos_id
            )
