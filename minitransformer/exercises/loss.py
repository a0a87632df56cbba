"""Checker for the label-smoothed cross-entropy loss.

Szegedy et al. (2016), used by Vaswani et al. (2017), section 5.4: the target
distribution puts ``1 − ε + ε/V`` on the true token and ``ε/V`` on every
other one (the convention of ``F.cross_entropy(label_smoothing=ε)``), so

    loss = (1 − ε) · (−log p_true) + ε · mean_v(−log p_v),

averaged over the non-padding target tokens. Reference:
:func:`minitransformer.training.label_smoothed_cross_entropy` (or, where the
training module is absent, ``F.cross_entropy`` with ``ignore_index`` and
``label_smoothing``, the same quantity).

Shape letters: ``B`` batch, ``T`` target length, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._harness import Case, Mistake, check, generator
from ._messages import t

__all__ = ["check_label_smoothing_loss"]


def _reference(logits: Tensor, target: Tensor, smoothing: float = 0.1,
               pad_id: int = 0) -> Tensor:
    try:
        from ..training import label_smoothed_cross_entropy
    except ImportError:  # the training module is optional here
        v = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, v).float(), target.reshape(-1),
                               ignore_index=pad_id, label_smoothing=smoothing)
    return label_smoothed_cross_entropy(logits, target, smoothing, pad_id)


def _parts(logits: Tensor, target: Tensor, pad_id: int):
    """(log-probabilities, −log p_true, non-pad mask, V)."""
    logp = logits.double().log_softmax(-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return logp, nll, target != pad_id, logits.shape[-1]


def _mean_kept(per_token: Tensor, keep: Tensor) -> Tensor:
    out = per_token.masked_fill(~keep, 0.0).sum() / keep.sum()
    # inf or NaN depending on how the reader sums: either way "anything non-finite"
    return out if torch.isfinite(out) else torch.tensor(float("nan")).clamp(min=1)


def _smoothed(logits, target, smoothing=0.1, pad_id=0, *, others=None, reduce="mean",
              swap=False, kl=False, sum_uniform=False, ignore_pad=True, fixed_pad=None,
              nll_weight=None):
    """The loss with one knob turned: the family of wrong answers.

    ``others``: how the ε mass is spread: None (ε/V over all V, the right one),
    "V-1" (over the V−1 wrong tokens) or "V-2" (over the tokens that are
    neither the true one nor padding, as in The Annotated Transformer).
    """
    pad = pad_id if fixed_pad is None else fixed_pad
    logp, nll, keep, v = _parts(logits, target, pad)
    eps = smoothing
    if others is None:
        q = torch.full_like(logp, eps / v)
        q.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / v)
    else:
        n = v - 1 if others == "V-1" else v - 2
        q = torch.full_like(logp, eps / n)
        if others == "V-2":
            q[..., pad] = 0.0
        q.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    if swap:
        q = torch.full_like(logp, (1 - eps) / v)
        q.scatter_(-1, target.unsqueeze(-1), eps + (1 - eps) / v)
    per_token = -(q * logp).sum(-1)
    if sum_uniform:
        per_token = (1 - eps) * nll - eps * logp.sum(-1)
    if nll_weight is not None:  # the NLL term weighted by nll_weight instead of (1 - ε)
        per_token = nll_weight * nll - eps * logp.mean(-1)
    if kl:
        per_token = per_token + (q * q.clamp(min=1e-300).log()).sum(-1)
    if not ignore_pad:
        keep = torch.ones_like(keep)
    if reduce == "mean":
        return _mean_kept(per_token, keep).float()
    if reduce == "sum":
        return per_token.masked_fill(~keep, 0.0).sum().float()
    if reduce == "numel":
        return (per_token.masked_fill(~keep, 0.0).sum() / keep.numel()).float()
    # "sentences": mean over each sentence, then over sentences
    per_sentence = per_token.masked_fill(~keep, 0.0).sum(-1) / keep.sum(-1).clamp(min=1)
    return per_sentence.mean().float()


def _naive_log(logits, target, smoothing=0.1, pad_id=0):
    """log(softmax(x)) instead of log_softmax: −inf where a probability underflows."""
    logp = logits.float().softmax(-1).log()
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    per_token = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    keep = target != pad_id
    out = per_token.masked_fill(~keep, 0.0).sum() / keep.sum()
    # inf or NaN depending on how the reader sums: either way "anything non-finite"
    return out if torch.isfinite(out) else torch.tensor(float("nan"))


def _mistakes() -> list[Mistake]:
    def knob(**kw):
        return lambda lo, t, smoothing=0.1, pad_id=0: _smoothed(lo, t, smoothing, pad_id, **kw)

    return [
        Mistake("ls.hint.no_smoothing", lambda lo, t, smoothing=0.1, pad_id=0:
                _smoothed(lo, t, 0.0, pad_id)),
        Mistake("ls.hint.swap", knob(swap=True)),
        Mistake("ls.hint.no_pad", knob(ignore_pad=False)),
        Mistake("ls.hint.numel", knob(reduce="numel")),
        Mistake("ls.hint.sum", knob(reduce="sum")),
        Mistake("ls.hint.sentences", knob(reduce="sentences")),
        Mistake("ls.hint.one_minus", knob(nll_weight=1.0)),
        Mistake("ls.hint.v_minus_1", knob(others="V-1")),
        Mistake("ls.hint.v_minus_2", knob(others="V-2")),
        Mistake("ls.hint.kl", knob(kl=True)),
        Mistake("ls.hint.sum_uniform", knob(sum_uniform=True)),
        Mistake("ls.hint.pad0", knob(fixed_pad=0)),
        Mistake("ls.hint.naive_log", _naive_log),
    ]


def _cases() -> list[Case]:
    g = generator(7)

    def logits(*shape, scale=2.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)

    def targets(b, t, v, pad, lengths):
        y = torch.randint(4, v, (b, t), generator=g)
        for i, n in enumerate(lengths):
            y[i, n:] = pad
        return y

    return [
        Case("ls.case.plain", (logits(3, 6, 11), targets(3, 6, 11, 0, [6, 4, 2]))),
        Case("ls.case.eps03", (logits(2, 7, 9), targets(2, 7, 9, 0, [7, 1])), {"smoothing": 0.3}),
        Case("ls.case.eps0", (logits(2, 4, 8), targets(2, 4, 8, 0, [4, 3])), {"smoothing": 0.0}),
        Case("ls.case.pad3", (logits(2, 5, 10), torch.tensor([[0, 5, 6, 3, 3], [7, 0, 0, 8, 3]])),
             {"smoothing": 0.2, "pad_id": 3}),
        Case("ls.case.length1", (logits(4, 1, 6), targets(4, 1, 6, 0, [1, 1, 1, 1]))),
        Case("ls.case.float64", (logits(2, 3, 5, dtype=torch.float64),
                                 targets(2, 3, 5, 0, [3, 2]))),
        Case("ls.case.large", (logits(2, 4, 7, scale=2000.0), targets(2, 4, 7, 0, [4, 2]))),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "Expected target size" in text or ("cross_entropy" in line and "size" in text):
        return t("ls.err.flatten")
    if ("Expected" in text and "dimension" in text) or "shape" in text:
        return t("ls.err.shapes")
    return None


def check_label_smoothing_loss(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(logits, target, smoothing=0.1, pad_id=0) -> loss``.

    Args:
        fn: the reader's loss: ``logits`` ``(B, T, V)``, ``target`` ``(B, T)``
            int64 ids, ``smoothing`` ε, ``pad_id``. Returns a 0-dim tensor: the
            mean over the non-pad positions of ``(1 − ε)·(−log p_true) +
            ε·mean_v(−log p_v)`` (PyTorch's ``label_smoothing`` convention: ε/V
            on every token). Any floating dtype is accepted.
        lang: language of the verdict; None for the current one.

    Tests: several ε (0 included), padding and pad_id=3, length 1, float64,
    logits of size ±2000.

    Returns:
        True if it matches :func:`minitransformer.training.label_smoothed_cross_entropy`.
    """
    return check(
        "label_smoothing_loss", fn, _cases(), _reference, _mistakes(),
        signature="fn(logits, target, smoothing=0.1, pad_id=0)", names=("name.loss",),
        atol=1e-4, rtol=1e-4, strict_dtype=False, on_error=_error, fallback="ls.fallback",
        lang=lang,
    )
