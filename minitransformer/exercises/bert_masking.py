"""Checker for BERT's masking rule (80/10/10), judged by its statistics.

Devlin et al. (2019), section 3.1: choose each ordinary token (not padding
or another special token) with probability ``p`` (15%); a chosen token
becomes the mask token with probability 0.8, a random ordinary token with
probability 0.1, and stays as it is with probability 0.1. The labels are the
original tokens at the chosen positions and ``-100`` (ignored by the loss)
everywhere else. Reference: :func:`minitransformer.mask_tokens` (it gives
the form of the result, and ``tests/test_exercises_lm.py`` checks that it
passes this checker, as do Hugging Face's way of drawing and an exact count).

The reader's function draws at random, so it is not compared entry by
entry: each case is one large batch, and the result must be consistent with
the rule: the labels define the chosen positions, only those may change,
and the shares (chosen among the ordinary tokens; masked, random and kept
among the chosen) must be within :data:`Z_LIMIT` standard deviations of the
rule's, the random tokens drawn from the ordinary ids below ``vocab_size``
and spread over them. A right answer fails by chance (12 shares, each beyond
6 deviations with a probability of 2·10⁻⁹) about twice in 10⁸ checks.

Shape letters: ``B`` batch, ``L`` length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.lm_batching import IGNORE_ID, mask_tokens
from ._harness import Case, Mistake, check, generator
from ._messages import t

__all__ = ["check_bert_masking", "Z_LIMIT"]

#: How many standard deviations a share may lie from the rule's.
Z_LIMIT = 6.0
#: The rule's shares among the chosen tokens: mask, random, unchanged.
MASK, RANDOM = 0.8, 0.1


def _reference(tokens: Tensor, mask_id: int, vocab_size: int, special_ids, p: float = 0.15):
    return mask_tokens(tokens, mask_id=mask_id, vocab_size=vocab_size, p=p,
                       special_ids=tuple(special_ids), generator=generator(5))


def _pool(vocab_size: int, mask_id: int, special_ids) -> Tensor:
    """The ids a random replacement may take: below vocab_size, not special, not mask_id."""
    ids = torch.arange(vocab_size)
    return ids[~torch.isin(ids, torch.tensor([*special_ids, mask_id]))]


# ---------------------------------------------------------------- wrong versions
def _masking(tokens, mask_id, vocab_size, special_ids, p=0.15, *, exclude="specials",
             p_used=None, choose="below", where="chosen", shares=(0.8, 0.1), draws="one",
             pool="ordinary", labels="chosen"):
    """BERT's masking with one knob turned (the family of wrong answers).

    ``exclude``: "specials", "pad" (only special_ids[0], the padding), "none".
    ``choose``: "below" (rand < p) or "above" (rand >= p). ``where``: the
    80/10/10 roll applied to the "chosen" tokens or to "all" ordinary ones.
    ``shares``: (mask, random); the rest is kept. ``draws``: "one" roll per
    token, or "independent" ones for mask and random (which overlap).
    ``pool``: "ordinary" ids or "all" of [0, vocab_size). ``labels``:
    "chosen", "everywhere" (the token at every position), "zero" (0 where not
    chosen), "inverted" (-100 at the chosen), "corrupted" (the new inputs).
    """
    p = p if p_used is None else p_used
    excluded = {"specials": [*special_ids, mask_id], "pad": [special_ids[0]], "none": []}[exclude]
    ordinary = ~torch.isin(tokens, torch.tensor(excluded, dtype=tokens.dtype))
    u = torch.rand(tokens.shape)
    chosen = ((u < p) if choose == "below" else (u >= p)) & ordinary
    roll = torch.rand(tokens.shape)
    target = chosen if where == "chosen" else ordinary
    m, r = shares
    if draws == "one":
        to_mask, to_random = target & (roll < m), target & (roll >= m) & (roll < m + r)
    else:
        to_mask, to_random = target & (roll < m), target & (torch.rand(tokens.shape) < r)
    ids = _pool(vocab_size, mask_id, special_ids) if pool == "ordinary" else \
        torch.arange(vocab_size)
    random_ids = ids[torch.randint(len(ids), tokens.shape)]
    inputs = torch.where(to_mask, mask_id, tokens)
    inputs = torch.where(to_random, random_ids, inputs)
    ignore = torch.full_like(tokens, IGNORE_ID)
    out = {"chosen": torch.where(chosen, tokens, ignore),
           "everywhere": tokens.clone(),
           "zero": torch.where(chosen, tokens, torch.zeros_like(tokens)),
           "inverted": torch.where(chosen, ignore, tokens),
           "corrupted": torch.where(chosen, inputs, ignore)}[labels]
    return inputs, out


def _knob(**kw):
    def fn(tokens, mask_id, vocab_size, special_ids, p=0.15):
        return _masking(tokens, mask_id, vocab_size, special_ids, p, **kw)
    return fn


# ---------------------------------------------------------------- statistics
@dataclass
class _Stats:
    """What the reader's (inputs, labels) say about one case."""

    tokens: Tensor
    inputs: Tensor
    labels: Tensor
    ordinary: Tensor  # (B, L) bool: may be chosen
    chosen: Tensor  # (B, L) bool: labels != -100
    pool: Tensor  # ids a replacement may take
    mask_id: int
    pad_id: int
    special_ids: tuple
    p: float

    @property
    def changed(self) -> Tensor:
        return self.inputs != self.tokens

    @property
    def masked(self) -> Tensor:
        return self.chosen & (self.inputs == self.mask_id)

    @property
    def replaced(self) -> Tensor:
        """Chosen positions that hold neither mask_id nor their own token."""
        return self.chosen & self.changed & (self.inputs != self.mask_id)

    def share(self, part: Tensor, of: Tensor) -> tuple[float, int]:
        n = int(of.sum())
        return (float((part & of).sum()) / n if n else 0.0), n

    def near(self, part: Tensor, of: Tensor, expected: float) -> bool:
        """The share of ``part`` in ``of`` is within Z_LIMIT deviations of ``expected``."""
        value, n = self.share(part, of)
        if n == 0:
            return expected == 0
        if expected <= 0 or expected >= 1:
            return abs(value - expected) < 1e-12
        return abs(value - expected) <= Z_LIMIT * math.sqrt(expected * (1 - expected) / n)

    def chosen_share_is(self, p: float) -> bool:
        return self.near(self.chosen, self.ordinary, p)

    def kept_share(self) -> float:
        """The rule's share of chosen tokens left as they were: the 10% kept, plus
        the random draws that happen to give the token back."""
        return 1 - MASK - RANDOM + RANDOM / len(self.pool)


def _stats(case: Case, got) -> _Stats | None:
    """The statistics of a result of the right form, else None."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    inputs, labels = got
    tokens, mask_id, vocab_size, special_ids = case.args[:4]
    p = case.kwargs.get("p", 0.15)
    if not all(isinstance(x, Tensor) and x.shape == tokens.shape and not x.is_floating_point()
               for x in (inputs, labels)):
        return None
    inputs, labels = inputs.long(), labels.long()
    ordinary = ~torch.isin(tokens, torch.tensor([*special_ids, mask_id]))
    return _Stats(tokens, inputs, labels, ordinary, labels != IGNORE_ID,
                  _pool(vocab_size, mask_id, special_ids), mask_id, special_ids[0],
                  tuple(special_ids), p)


def _labels_right(s: _Stats) -> bool:
    return bool(torch.equal(s.labels[s.chosen], s.tokens[s.chosen]))


def _selection_right(s: _Stats) -> bool:
    return not bool((s.chosen & ~s.ordinary).any()) and s.chosen_share_is(s.p)


def _shares_right(s: _Stats) -> bool:
    random_share = RANDOM * (1 - 1 / len(s.pool))
    return (s.near(s.masked, s.chosen, MASK) and s.near(s.replaced, s.chosen, random_share)
            and s.near(s.chosen & ~s.changed, s.chosen, s.kept_share()))


def _replacements_right(s: _Stats) -> bool:
    drawn = s.inputs[s.replaced]
    if drawn.numel() == 0:
        return True
    if not bool(torch.isin(drawn, s.pool).all()):
        return False
    return drawn.unique().numel() >= min(len(s.pool) - 1, drawn.numel()) / 2  # spread out


def _follows_the_rule(s: _Stats) -> bool:
    only_chosen_change = not bool((s.changed & ~s.chosen).any())
    return (_labels_right(s) and _selection_right(s) and only_chosen_change
            and _shares_right(s) and _replacements_right(s))


def _right(got, expected, case: Case, nan: str = "none") -> bool:
    """The rule's comparison: the form of ``expected``, the statistics of the rule."""
    s = _stats(case, got)
    return s is not None and _follows_the_rule(s)


def _explains(predicate: Callable[[_Stats], bool]) -> Callable[[Case, object], bool]:
    def explains(case: Case, got) -> bool:
        s = _stats(case, got)
        return s is not None and bool(predicate(s))
    return explains


def _no_keep(s: _Stats) -> bool:
    """No chosen token is left as it was, beyond the random draws that give it
    back (about one in ``len(pool)``; three times that allowed)."""
    kept = float((s.chosen & ~s.changed).sum())
    return kept <= 3 * float(s.replaced.sum()) / len(s.pool) + 1


def _chosen_right(predicate: Callable[[_Stats], bool]) -> Callable[[_Stats], bool]:
    """``predicate``, asked only where the labels and the chosen tokens are right."""
    return lambda s: _labels_right(s) and _selection_right(s) and predicate(s)


def _overlapping(s: _Stats) -> bool:
    """The shares of a second draw for the random 10% that overrides the 80%:
    72% masked, 10% random, 18% kept."""
    back = RANDOM / len(s.pool)  # random draws that give the token back
    return (s.near(s.masked, s.chosen, MASK * (1 - RANDOM))
            and s.near(s.replaced, s.chosen, RANDOM - back)
            and s.near(s.chosen & ~s.changed, s.chosen, (1 - MASK) * (1 - RANDOM) + back))


def _mistakes() -> list[Mistake]:
    def m(hint, predicate, **kw):
        return Mistake(hint, _knob(**kw), explains=_explains(predicate))

    return [
        m("bert.hint.not_ignored", lambda s: not bool((s.labels == IGNORE_ID).any()),
          labels="everywhere"),
        m("bert.hint.not_ignored", lambda s: not bool((s.labels == IGNORE_ID).any()),
          labels="zero"),
        m("bert.hint.labels_inverted",
          lambda s: bool((s.labels[s.changed] == IGNORE_ID).all())
          and bool((s.chosen & ~s.ordinary).any()), labels="inverted"),
        m("bert.hint.labels_corrupted",
          lambda s: bool(torch.equal(s.labels[s.chosen], s.inputs[s.chosen]))
          and bool((s.labels == s.mask_id).any()), labels="corrupted"),
        m("bert.hint.pad", lambda s: bool((s.chosen & (s.tokens == s.pad_id)).any()),
          exclude="none"),
        m("bert.hint.specials", lambda s: bool((s.chosen & ~s.ordinary).any()), exclude="pad"),
        # where the case cannot show the mistake (p = 0.5, p = 0.15), the answer must be right
        m("bert.hint.p_inverted", lambda s: _follows_the_rule(s) if s.p == 0.5
          else s.chosen_share_is(1 - s.p), choose="above"),
        m("bert.hint.p_fixed", lambda s: _follows_the_rule(s) if s.p == 0.15
          else s.chosen_share_is(0.15), p_used=0.15),
        m("bert.hint.all_tokens",
          lambda s: s.share(s.changed & ~s.chosen, s.ordinary & ~s.chosen)[0] > 0.3,
          where="all"),
        m("bert.hint.random_pool", lambda s: not bool(torch.isin(s.inputs[s.replaced],
                                                                 s.pool).all()), pool="all"),
        # the shares among the chosen, once the chosen are right
        m("bert.hint.all_masked", _chosen_right(lambda s: s.near(s.masked, s.chosen, 1.0)),
          shares=(1.0, 0.0)),
        m("bert.hint.no_keep", _chosen_right(_no_keep), shares=(0.8, 0.2)),
        m("bert.hint.no_random", _chosen_right(lambda s: s.near(s.replaced, s.chosen, 0.0)),
          shares=(0.9, 0.0)),
        m("bert.hint.overlap", _chosen_right(_overlapping), draws="independent"),
        m("bert.hint.shares", _chosen_right(lambda s: not _shares_right(s)),
          shares=(0.5, 0.25)),
    ]


# ---------------------------------------------------------------- cases
def _cases() -> list[Case]:
    g = generator(41)

    def batch(b, n, vocab_size, low, mask_id):
        """Rows ``BOS + sentence + EOS`` of random lengths, padded with 0, with
        a few UNK (3) inside; ordinary tokens from ``[low, vocab_size)``
        without ``mask_id``."""
        out = torch.zeros(b, n, dtype=torch.long)
        lengths = torch.randint(n // 2, n - 1, (b,), generator=g)
        for i, m in enumerate(lengths.tolist()):
            sentence = torch.randint(low, vocab_size, (m,), generator=g)
            sentence[sentence == mask_id] = low
            sentence[torch.rand(m, generator=g) < 0.02] = 3
            out[i, : m + 2] = torch.cat([torch.tensor([1]), sentence, torch.tensor([2])])
        return out

    specials = (0, 1, 2, 3)
    return [
        Case("bert.case.plain", (batch(64, 512, 40, 4, 40), 40, 40, specials),
             fields={"p": 0.15}),
        Case("bert.case.half", (batch(32, 256, 30, 5, 4), 4, 30, specials), {"p": 0.5},
             fields={"p": 0.5}),
        Case("bert.case.small_vocab", (batch(64, 384, 12, 4, 12), 12, 12, specials),
             {"p": 0.3}, fields={"p": 0.3}),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "Boolean value of Tensor" in text:  # `token in special_ids` on a tensor
        return t("bert.err.isin")
    if "randint" in line:
        return t("bert.err.randint")
    return None


def check_bert_masking(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(tokens, mask_id, vocab_size, special_ids, p=0.15) -> (inputs, labels)``.

    Args:
        fn: the reader's masking: ``tokens`` ``(B, L)`` int64 ids (rows ``BOS +
            sentence + EOS``, padded), ``mask_id`` the mask token's id,
            ``vocab_size``, ``special_ids`` a tuple of the ids never chosen
            (padding first), ``p`` the probability of choosing an ordinary
            token. Returns ``inputs`` and ``labels``, both ``(B, L)`` int64:
            each ordinary token (not in ``special_ids``, not ``mask_id``) is
            chosen with probability ``p``; a chosen one becomes ``mask_id``
            (80%), a random ordinary id below ``vocab_size`` (10%) or stays
            (10%); ``labels`` holds the original token where chosen and
            ``-100`` elsewhere. Draw with torch's random functions.
        lang: language of the verdict; None for the current one.

    Tests (32,768, 8,192 and 24,576 tokens): p = 0.15, 0.5 with a mask_id
    inside the vocabulary, 0.3 with a vocabulary of 12.

    Returns:
        True if the result follows the rule of :func:`minitransformer.mask_tokens`.
    """
    return check(
        "bert_masking", fn, _cases(), _reference, _mistakes(),
        signature="fn(tokens, mask_id, vocab_size, special_ids, p=0.15)",
        names=("name.inputs", "name.labels"), compare=_right, on_error=_error,
        fallback="bert.fallback", random_ok=True, lang=lang,
    )
