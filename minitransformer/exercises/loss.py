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
              swap=False, kl=False, sum_uniform=False, ignore_pad=True, fixed_pad=None):
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


_HINTS = {
    "no_smoothing": (
        "the smoothing is not applied (this is the plain cross-entropy): mix "
        "(1 − ε)·(−log p_true) with ε·mean over the vocabulary of (−log p_v)."
    ),
    "swap": (
        "ε and 1 − ε are swapped: the true token keeps most of the mass, (1 − ε)·(−log "
        "p_true) + ε·mean_v(−log p_v)."
    ),
    "no_pad": (
        "padding positions are counted: leave out every position whose target is "
        "pad_id, and average over the others."
    ),
    "numel": (
        "padding is zeroed but you divided by all B·T positions: divide by the number of "
        "non-pad targets, (target != pad_id).sum()."
    ),
    "sum": "you returned the sum over tokens; return the mean over the non-pad tokens.",
    "sentences": (
        "you averaged each sentence, then the sentences: average over all non-pad "
        "*tokens* at once (every token weighs the same, so a long sentence counts more "
        "than a short one)."
    ),
    "V-1": (
        "you spread ε over the V − 1 wrong tokens (true token gets exactly 1 − ε). This "
        "book follows PyTorch's label_smoothing: ε/V on *every* token, the true one "
        "included, so the true token gets 1 − ε + ε/V: loss = (1 − ε)·nll + "
        "ε·mean_v(−log p_v)."
    ),
    "V-2": (
        "you spread ε over V − 2 tokens (neither the true one nor padding), as The "
        "Annotated Transformer does. This book follows PyTorch's label_smoothing: ε/V "
        "on every token, so loss = (1 − ε)·nll + ε·mean_v(−log p_v)."
    ),
    "kl": (
        "you computed the KL divergence to the smoothed target (nn.KLDivLoss, as in "
        "The Annotated Transformer). It differs from the cross-entropy by the entropy of "
        "the smoothed target, a constant; this exercise asks for the cross-entropy, "
        "−Σ_v q_v log p_v."
    ),
    "sum_uniform": (
        "the uniform part is summed over the vocabulary: each token gets ε/V, so it is "
        "ε · *mean*_v(−log p_v), not ε · sum."
    ),
    "pad0": "padding is compared with 0 instead of the pad_id argument (here pad_id=3).",
    "naive_log": (
        "log(softmax(x)) underflows for large logits (softmax gives 0, log gives −inf): "
        "use torch.log_softmax(logits, dim=-1), which stays finite."
    ),
}


def _mistakes() -> list[Mistake]:
    h = _HINTS

    def knob(**kw):
        return lambda lo, t, smoothing=0.1, pad_id=0: _smoothed(lo, t, smoothing, pad_id, **kw)

    return [
        Mistake(h["no_smoothing"], lambda lo, t, smoothing=0.1, pad_id=0:
                _smoothed(lo, t, 0.0, pad_id)),
        Mistake(h["swap"], knob(swap=True)),
        Mistake(h["no_pad"], knob(ignore_pad=False)),
        Mistake(h["numel"], knob(reduce="numel")),
        Mistake(h["sum"], knob(reduce="sum")),
        Mistake(h["sentences"], knob(reduce="sentences")),
        Mistake(h["V-1"], knob(others="V-1")),
        Mistake(h["V-2"], knob(others="V-2")),
        Mistake(h["kl"], knob(kl=True)),
        Mistake(h["sum_uniform"], knob(sum_uniform=True)),
        Mistake(h["pad0"], knob(fixed_pad=0)),
        Mistake(h["naive_log"], _naive_log),
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
        Case("logits (3, 6, 11), padded targets, smoothing 0.1",
             (logits(3, 6, 11), targets(3, 6, 11, 0, [6, 4, 2]))),
        Case("smoothing 0.3, targets of uneven lengths",
             (logits(2, 7, 9), targets(2, 7, 9, 0, [7, 1])), {"smoothing": 0.3}),
        Case("smoothing 0 (plain cross-entropy)", (logits(2, 4, 8), targets(2, 4, 8, 0, [4, 3])),
             {"smoothing": 0.0}),
        Case("pad_id=3, and real targets equal to 0",
             (logits(2, 5, 10), torch.tensor([[0, 5, 6, 3, 3], [7, 0, 0, 8, 3]])),
             {"smoothing": 0.2, "pad_id": 3}),
        Case("length 1: logits (4, 1, 6)", (logits(4, 1, 6), targets(4, 1, 6, 0, [1, 1, 1, 1]))),
        Case("float64 logits (2, 3, 5)",
             (logits(2, 3, 5, dtype=torch.float64), targets(2, 3, 5, 0, [3, 2]))),
        Case("large logits (about ±2000)", (logits(2, 4, 7, scale=2000.0),
                                            targets(2, 4, 7, 0, [4, 2]))),
    ]


def _error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, TypeError) and "argument" in text:
        return "the function must have the signature fn(logits, target, smoothing=0.1, pad_id=0)."
    if ("Expected" in text and "dimension" in text) or "shape" in text:
        return ("a shape error: logits are (B, T, V) and target (B, T); F.cross_entropy "
                "wants (N, V) and (N,), so flatten: logits.reshape(-1, V), target.reshape(-1).")
    return None


def check_label_smoothing_loss(fn: Callable) -> bool:
    """Check ``fn(logits, target, smoothing=0.1, pad_id=0) -> loss``.

    Args:
        fn: the reader's loss: ``logits`` ``(B, T, V)``, ``target`` ``(B, T)``
            int64 ids, ``smoothing`` ε, ``pad_id``. Returns a 0-dim tensor: the
            mean over the non-pad positions of ``(1 − ε)·(−log p_true) +
            ε·mean_v(−log p_v)`` (PyTorch's ``label_smoothing`` convention: ε/V
            on every token). Any floating dtype is accepted.

    Tests: several ε (0 included), padding and pad_id=3, length 1, float64,
    logits of size ±2000.

    Returns:
        True if it matches :func:`minitransformer.training.label_smoothed_cross_entropy`.
    """
    return check(
        "label_smoothing_loss", fn, _cases(), _reference, _mistakes(), names=("the loss",),
        atol=1e-4, rtol=1e-4, strict_dtype=False, on_error=_error,
        fallback="One right answer: F.cross_entropy(logits.reshape(-1, V), "
                 "target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing).",
    )
