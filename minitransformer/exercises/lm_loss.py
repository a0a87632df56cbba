"""Checker for the next-token loss of a language model: the shift by one, and padding.

A decoder-only model (Radford et al. 2018) reads ``tokens`` ``(B, L)`` and
returns logits ``(B, L, V)`` in which position ``t`` has seen tokens
``0..t`` and predicts token ``t + 1``. So the loss pairs ``logits[:, :-1]``
with ``tokens[:, 1:]``, and averages the cross-entropy over the targets that
are not padding (every real target token weighs the same). Reference: the
package's loss, :func:`minitransformer.training.label_smoothed_cross_entropy`
with no smoothing, on the pairs :func:`minitransformer.data.make_lm_batch`
builds (``inputs = row[:-1]``, ``targets = row[1:]``; the tests check that
the two agree, and agree with ``F.cross_entropy(..., ignore_index=pad_id)``).

Shape letters: ``B`` batch, ``L`` length, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..training.loss import label_smoothed_cross_entropy
from ._harness import Case, Mistake, check, generator
from ._messages import t

__all__ = ["check_next_token_loss"]

BOS, EOS = 1, 2


def _reference(logits: Tensor, tokens: Tensor, pad_id: int = 0) -> Tensor:
    # position t predicts token t + 1: (B, L - 1, V) against (B, L - 1)
    return label_smoothed_cross_entropy(logits[:, :-1], tokens[:, 1:], 0.0, pad_id)


def _loss(logits, tokens, pad_id=0, *, shift="right", ignore="targets", reduce="tokens",
          fixed_pad=None, log_probs="log_softmax"):
    """The loss with one knob turned: the family of wrong answers.

    ``shift``: "right" (logits[:, :-1] with tokens[:, 1:]), "none" (every
    position scored against its own token), "trim" (logits[:, :-1] with
    tokens[:, :-1]), "wrong_way" (logits[:, 1:] with tokens[:, :-1]).
    ``ignore``: which padding is left out: "targets", "inputs" (where the
    position's own token is padding), "none". ``log_probs``: "log_softmax",
    "double" (a softmax before cross_entropy's own), "raw" (nll_loss on
    the logits themselves).
    """
    pad = pad_id if fixed_pad is None else fixed_pad
    scores, target, own = {
        "right": (logits[:, :-1], tokens[:, 1:], tokens[:, :-1]),
        "none": (logits, tokens, tokens),
        "trim": (logits[:, :-1], tokens[:, :-1], tokens[:, :-1]),
        "wrong_way": (logits[:, 1:], tokens[:, :-1], tokens[:, 1:]),
    }[shift]
    scores = scores.double()
    if log_probs == "double":
        scores = scores.softmax(dim=-1)
    logp = scores if log_probs == "raw" else scores.log_softmax(dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, n)
    keep = {"targets": target != pad, "inputs": own != pad,
            "none": torch.ones_like(target, dtype=torch.bool)}[ignore]
    kept = nll.masked_fill(~keep, 0.0)
    if reduce == "tokens":
        out = kept.sum() / keep.sum()
    elif reduce == "all":
        out = kept.sum() / keep.numel()
    elif reduce == "sum":
        out = kept.sum()
    else:  # "sentences": each row's mean, then the mean of the rows
        out = (kept.sum(-1) / keep.sum(-1).clamp(min=1)).mean()
    return out.to(logits.dtype)


def _knob(**kw):
    def fn(logits, tokens, pad_id=0):
        return _loss(logits, tokens, pad_id, **kw)
    return fn


def _mistakes() -> list[Mistake]:
    return [
        Mistake("lm_loss.hint.not_shifted", _knob(shift="none")),
        Mistake("lm_loss.hint.not_shifted", _knob(shift="trim")),
        Mistake("lm_loss.hint.wrong_way", _knob(shift="wrong_way")),
        Mistake("lm_loss.hint.pad_counted", _knob(ignore="none")),
        Mistake("lm_loss.hint.input_pad", _knob(ignore="inputs")),
        Mistake("lm_loss.hint.mean_all", _knob(reduce="all")),
        Mistake("lm_loss.hint.sum", _knob(reduce="sum")),
        Mistake("lm_loss.hint.sentences", _knob(reduce="sentences")),
        Mistake("lm_loss.hint.pad0", _knob(fixed_pad=0)),
        Mistake("lm_loss.hint.double_softmax", _knob(log_probs="double")),
        Mistake("lm_loss.hint.raw_nll", _knob(log_probs="raw")),
    ]


def _cases() -> list[Case]:
    g = generator(31)

    def logits(b, n, v, dtype=torch.float32):
        return (torch.randn(b, n, v, generator=g, dtype=torch.float64) * 2.0).to(dtype)

    def rows(lengths, n, v, pad=0, low=4):
        """Rows ``BOS + sentence + EOS`` of the given sentence lengths, padded to ``n``."""
        out = torch.full((len(lengths), n), pad, dtype=torch.long)
        for i, m in enumerate(lengths):
            sentence = torch.randint(low, v, (m,), generator=g)
            out[i, : m + 2] = torch.cat([torch.tensor([BOS]), sentence, torch.tensor([EOS])])
        return out

    pad3 = rows([3, 1], 6, 10, pad=3, low=4)
    pad3[0, 1], pad3[1, 1] = 0, 0  # real tokens 0: only pad_id=3 is padding here
    return [
        Case("lm_loss.case.plain", (logits(3, 7, 11), rows([5, 3, 1], 7, 11))),
        Case("lm_loss.case.full", (logits(2, 6, 9), rows([4, 4], 6, 9))),
        Case("lm_loss.case.pad3", (logits(2, 6, 10), pad3), {"pad_id": 3}),
        Case("lm_loss.case.length2", (logits(3, 2, 7), rows([0, 0, 0], 2, 7))),
        Case("lm_loss.case.float64", (logits(2, 5, 8, torch.float64), rows([3, 2], 5, 8))),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "Expected input batch_size" in text or "must match the size" in text \
            or "shape" in text:
        return t("lm_loss.err.shapes")  # as many predictions as targets, after the shift
    if "Expected target size" in text or ("cross_entropy" in line and "size" in text):
        return t("lm_loss.err.flatten")
    return None


def check_next_token_loss(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(logits, tokens, pad_id=0) -> loss``.

    Args:
        fn: the reader's language-model loss: ``logits`` ``(B, L, V)``, the
            model's output for ``tokens`` ``(B, L)`` int64 (each row ``BOS +
            sentence + EOS`` then ``pad_id`` up to ``L``); position ``t``'s
            logits predict token ``t + 1``. Returns a 0-dim tensor: the mean
            cross-entropy over the ``B · (L − 1)`` predictions whose target is
            not ``pad_id``. Any floating dtype is accepted.
        lang: language of the verdict; None for the current one.

    Tests: padded rows of uneven lengths, rows without padding, pad_id=3
    with real tokens 0, length 2 (one prediction per row), float64.

    Returns:
        True if it matches the package's loss on ``make_lm_batch``'s pairs.
    """
    return check(
        "next_token_loss", fn, _cases(), _reference, _mistakes(),
        signature="fn(logits, tokens, pad_id=0)", names=("name.loss",), atol=1e-4, rtol=1e-4,
        strict_dtype=False, on_error=_error, fallback="lm_loss.fallback", lang=lang,
    )
