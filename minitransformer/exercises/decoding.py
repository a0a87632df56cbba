"""Checker for one step of greedy decoding.

Greedy search feeds BOS, then at every step appends the most probable next
token, until EOS. One step, with the conventions of
:func:`minitransformer.decoding.greedy_decode`:

- encode the source with its padding mask (``model.src_mask(src)``) and
  decode the whole prefix (which starts with BOS) against that memory;
- read the logits at the *last* prefix position;
- never choose BOS or PAD (their logits count as −inf);
- a row whose prefix already holds EOS is finished and emits EOS again.

Shape letters: ``B`` batch, ``S`` source length, ``t`` prefix length,
``V`` target vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..model import Transformer, TransformerConfig
from ._harness import Case, Mistake, check, generator

__all__ = ["check_greedy_step"]

BOS, EOS, PAD = 1, 2, 0
VOCAB = 12


def _logits(model, src, prefix, *, memory_mask=True, extra_bos=False, drop_last=False):
    mask = model.src_mask(src)
    with torch.no_grad():
        memory = model.encode(src, mask)
        if extra_bos:
            prefix = torch.cat([torch.full_like(prefix[:, :1], BOS), prefix], dim=1)
        if drop_last and prefix.shape[1] > 1:
            prefix = prefix[:, :-1]
        return model.decode(prefix, memory, mask if memory_mask else None)  # (B, t, V)


def _pick(logits: Tensor, prefix: Tensor, eos_id: int, *, ban=True, finished="eos",
          position=-1) -> Tensor:
    scores = logits[:, position].clone()  # (B, V)
    if ban:
        scores[:, [BOS, PAD]] = float("-inf")
    nxt = scores.argmax(dim=-1)  # (B,)
    done = (prefix == eos_id).any(dim=1)
    if finished == "eos":
        nxt = nxt.masked_fill(done, eos_id)
    elif finished == "pad":
        nxt = nxt.masked_fill(done, PAD)
    return nxt


def _reference(model, src, prefix, bos_id=BOS, eos_id=EOS):
    return _pick(_logits(model, src, prefix), prefix, eos_id)


def _knob(logit_kw=None, **pick_kw):
    def fn(model, src, prefix, bos_id=BOS, eos_id=EOS):
        return _pick(_logits(model, src, prefix, **(logit_kw or {})), prefix, eos_id, **pick_kw)
    return fn


_HINTS = {
    "whole": (
        "you returned the extended prefix; return only the next token of each row, a "
        "(B,) int64 tensor (the caller appends it)."
    ),
    "first": (
        "you read the prediction at the first position; the next token is predicted by "
        "the *last* position of the prefix: logits[:, -1]."
    ),
    "extra_bos": (
        "BOS is added twice: the prefix already starts with BOS, so decode it as it is."
    ),
    "drop_last": (
        "the last token of the prefix is not fed: decode the whole prefix (it ends with "
        "the token chosen at the previous step)."
    ),
    "no_ban": (
        "BOS or PAD was chosen: they are never generated, so set their logits to -inf "
        "before the argmax (greedy_decode does the same)."
    ),
    "finished": (
        "a row whose prefix already contains EOS is finished: it must emit EOS again "
        "(not a new word), as greedy_decode does."
    ),
    "finished_pad": (
        "finished rows emit EOS again in this book's convention, not PAD "
        "(greedy_decode keeps emitting EOS and cuts the output at the first EOS)."
    ),
    "no_memory_mask": (
        "the source padding is not masked: pass model.src_mask(src) to model.encode and "
        "as memory_mask to model.decode, so no query attends to padded source positions."
    ),
    "axis": "argmax over the wrong axis: pick over the vocabulary, the last axis (dim=-1).",
}


def _mistakes() -> list[Mistake]:
    h = _HINTS

    def whole(model, src, prefix, bos_id=BOS, eos_id=EOS):
        return torch.cat([prefix, _reference(model, src, prefix)[:, None]], dim=1)

    def axis(model, src, prefix, bos_id=BOS, eos_id=EOS):
        return _logits(model, src, prefix)[:, -1].argmax(dim=0)

    def axis_banned(model, src, prefix, bos_id=BOS, eos_id=EOS):
        logits = _logits(model, src, prefix)[:, -1]
        logits[:, [BOS, PAD]] = float("-inf")
        return logits.argmax(dim=0)

    return [
        Mistake(h["whole"], whole),
        Mistake(h["axis"], axis),
        Mistake(h["axis"], axis_banned),
        Mistake(h["first"], _knob(position=0)),
        Mistake(h["extra_bos"], _knob({"extra_bos": True})),
        Mistake(h["drop_last"], _knob({"drop_last": True})),
        Mistake(h["no_memory_mask"], _knob({"memory_mask": False})),
        Mistake(h["no_ban"], _knob(ban=False)),
        Mistake(h["finished"], _knob(finished="none")),
        Mistake(h["finished_pad"], _knob(finished="pad")),
    ]


def _model(seed: int, favour: int | None = None) -> Transformer:
    """A small random Transformer (eval mode, no dropout); ``favour`` adds a
    large bias to one output id, so an unbanned argmax picks it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = TransformerConfig(VOCAB, VOCAB, d_model=16, num_heads=2, num_encoder_layers=1,
                                   num_decoder_layers=1, d_ff=32, dropout=0.0, max_len=32)
        model = Transformer(config).eval()
        with torch.no_grad():  # sharper, more varied logits than at initialisation
            model.generator.weight.normal_(0.0, 2.0)
            model.generator.bias.zero_()
            if favour is not None:
                model.generator.bias[favour] = 30.0
    return model


def _cases() -> list[Case]:
    g = generator(8)

    def src(b, s, lengths):
        x = torch.randint(3, VOCAB, (b, s), generator=g)
        for i, n in enumerate(lengths):
            x[i, n:] = PAD
        return x

    def prefix(rows):
        return torch.tensor(rows)

    model = _model(90)
    words = [[BOS, 5, 7, 4, 9], [BOS, 8, 8, 3, 6], [BOS, 4, 10, 11, 5]]
    return [
        Case("3 sources (2 padded), prefix of 5 tokens",
             (model, src(3, 6, [6, 4, 2]), prefix(words))),
        Case("first step: prefix [BOS] only", (model, src(3, 5, [5, 5, 3]), prefix([[BOS]] * 3))),
        Case("a finished row: its prefix already holds EOS",
             (model, src(3, 4, [4, 4, 2]),
              prefix([[BOS, 5, EOS, EOS], [BOS, 6, 7, 9], [BOS, EOS, EOS, EOS]]))),
        Case("mostly padding: sources (3, 8) with 1 to 3 real tokens",
             (model, src(3, 8, [1, 3, 2]), prefix([r[:3] for r in words]))),
        Case("a model whose logits favour BOS", (_model(91, favour=BOS), src(2, 5, [5, 3]),
                                                 prefix([r[:3] for r in words[:2]]))),
        Case("a model whose logits favour PAD", (_model(92, favour=PAD), src(2, 5, [5, 3]),
                                                 prefix([r[:4] for r in words[1:]]))),
        Case("batch of 1, source of length 1", (model, src(1, 1, [1]), prefix([[BOS, 3]]))),
    ]


def _error(case: Case, exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, TypeError) and "argument" in text:
        return ("the function must have the signature fn(model, src, prefix, bos_id=1, "
                "eos_id=2).")
    if "memory" in text or "shape" in text:
        return ("use the model's interface: mask = model.src_mask(src); memory = "
                "model.encode(src, mask); logits = model.decode(prefix, memory, mask), "
                "which is (B, t, V).")
    return None


def check_greedy_step(fn: Callable) -> bool:
    """Check ``fn(model, src, prefix, bos_id=1, eos_id=2) -> next_ids``.

    Args:
        fn: the reader's greedy step. ``model`` is a
            :class:`minitransformer.Transformer` in eval mode (any model with
            ``src_mask``/``encode``/``decode`` would do); ``src`` ``(B, S)``
            int64 source ids padded with ``model.config.pad_id`` (0);
            ``prefix`` ``(B, t)`` the target so far, starting with BOS.
            Returns ``(B,)`` int64: for each row, the argmax of the logits at
            the last prefix position, computed with the source padding
            masked, never BOS or PAD, and EOS for a row whose prefix already
            contains EOS.

    Tests: a long and a one-token prefix, a finished row, heavily padded
    sources, models whose logits favour BOS or PAD, batch 1 with a source of
    length 1.

    Returns:
        True if it agrees with the step of :func:`minitransformer.decoding.greedy_decode`.
    """
    return check("greedy_step", fn, _cases(), _reference, _mistakes(),
                 names=("the next tokens",), on_error=_error,
                 fallback="Decode the prefix against the encoded source, take "
                          "logits[:, -1], ban BOS and PAD, argmax, and keep finished "
                          "rows at EOS.")
