"""Checker for one step of greedy decoding.

Greedy search feeds BOS, then at every step appends the most probable next
token, until EOS. One step, with the conventions of
:func:`minitransformer.decoding.greedy_decode`:

- encode the source with its padding mask (``model.src_mask(src)``) and
  decode the whole prefix (which starts with BOS) against that memory;
- read the logits at the *last* prefix position;
- never choose ``bos_id`` or PAD (``model.config.pad_id``): their logits
  count as −inf;
- a row whose prefix already holds ``eos_id`` is finished and emits
  ``eos_id`` again.

Shape letters: ``B`` batch, ``S`` source length, ``t`` prefix length,
``V`` target vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..model import Transformer, TransformerConfig
from ._harness import Case, Mistake, check, generator
from ._messages import t

__all__ = ["check_greedy_step"]

BOS, EOS, PAD = 1, 2, 0
VOCAB = 12


def _logits(model, src, prefix, bos_id=BOS, *, memory_mask=True, extra_bos=False,
            drop_last=False):
    mask = model.src_mask(src)
    with torch.no_grad():
        memory = model.encode(src, mask)
        if extra_bos:
            prefix = torch.cat([torch.full_like(prefix[:, :1], bos_id), prefix], dim=1)
        if drop_last and prefix.shape[1] > 1:
            prefix = prefix[:, :-1]
        return model.decode(prefix, memory, mask if memory_mask else None)  # (B, t, V)


def _pick(logits: Tensor, prefix: Tensor, bos_id: int, eos_id: int, pad_id: int, *,
          ban=("bos", "pad"), finished="eos", position=-1) -> Tensor:
    scores = logits[:, position].clone()  # (B, V)
    banned = [{"bos": bos_id, "pad": pad_id, "bos1": BOS}[name] for name in ban]
    if banned:
        scores[:, banned] = float("-inf")
    nxt = scores.argmax(dim=-1)  # (B,)
    done = (prefix == eos_id).any(dim=1)
    if finished == "eos":
        nxt = nxt.masked_fill(done, eos_id)
    elif finished == "pad":
        nxt = nxt.masked_fill(done, pad_id)
    return nxt


def _reference(model, src, prefix, bos_id=BOS, eos_id=EOS):
    return _pick(_logits(model, src, prefix), prefix, bos_id, eos_id, model.config.pad_id)


def _knob(logit_kw=None, eos=None, **pick_kw):
    """A wrong step: ``logit_kw`` changes how the logits are computed,
    ``pick_kw`` how the token is chosen, ``eos`` hard-codes the EOS id."""
    def fn(model, src, prefix, bos_id=BOS, eos_id=EOS):
        logits = _logits(model, src, prefix, bos_id, **(logit_kw or {}))
        return _pick(logits, prefix, bos_id, eos_id if eos is None else eos,
                     model.config.pad_id, **pick_kw)
    return fn


def _mistakes() -> list[Mistake]:
    def whole(model, src, prefix, bos_id=BOS, eos_id=EOS):
        return torch.cat([prefix, _reference(model, src, prefix, bos_id, eos_id)[:, None]], dim=1)

    def axis(model, src, prefix, bos_id=BOS, eos_id=EOS):
        return _logits(model, src, prefix)[:, -1].argmax(dim=0)

    def axis_banned(model, src, prefix, bos_id=BOS, eos_id=EOS):
        logits = _logits(model, src, prefix)[:, -1]
        logits[:, [bos_id, model.config.pad_id]] = float("-inf")
        return logits.argmax(dim=0)

    return [
        Mistake("greedy.hint.whole", whole),
        Mistake("greedy.hint.axis", axis),
        Mistake("greedy.hint.axis", axis_banned),
        Mistake("greedy.hint.first", _knob(position=0)),
        Mistake("greedy.hint.extra_bos", _knob({"extra_bos": True})),
        Mistake("greedy.hint.drop_last", _knob({"drop_last": True})),
        Mistake("greedy.hint.no_memory_mask", _knob({"memory_mask": False})),
        Mistake("greedy.hint.no_ban", _knob(ban=())),
        Mistake("greedy.hint.pad_chosen", _knob(ban=("bos",))),
        Mistake("greedy.hint.bos_chosen", _knob(ban=("pad",))),
        Mistake("greedy.hint.bos_constant", _knob(ban=("bos1", "pad"))),
        Mistake("greedy.hint.eos_constant", _knob(eos=EOS)),
        Mistake("greedy.hint.finished", _knob(finished="none")),
        Mistake("greedy.hint.finished_pad", _knob(finished="pad")),
    ]


def _model(seed: int, favour: int | None = None) -> Transformer:
    """A small random Transformer in eval mode (with dropout, which the step
    must leave off); ``favour`` adds a large bias to one output id, so an
    unbanned argmax picks it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        config = TransformerConfig(VOCAB, VOCAB, d_model=16, num_heads=2, num_encoder_layers=1,
                                   num_decoder_layers=1, d_ff=32, dropout=0.1, max_len=32)
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
        Case("greedy.case.plain", (model, src(3, 6, [6, 4, 2]), prefix(words))),
        Case("greedy.case.first_step", (model, src(3, 5, [5, 5, 3]), prefix([[BOS]] * 3))),
        Case("greedy.case.finished", (model, src(3, 4, [4, 4, 2]),
                                      prefix([[BOS, 5, EOS, EOS], [BOS, 6, 7, 9],
                                              [BOS, EOS, EOS, EOS]]))),
        Case("greedy.case.padding", (model, src(3, 8, [1, 3, 2]), prefix([r[:3] for r in words]))),
        Case("greedy.case.favour_bos", (_model(91, favour=BOS), src(2, 5, [5, 3]),
                                        prefix([r[:3] for r in words[:2]]))),
        Case("greedy.case.favour_pad", (_model(92, favour=PAD), src(2, 5, [5, 3]),
                                        prefix([r[:4] for r in words[1:]]))),
        Case("greedy.case.batch1", (model, src(1, 1, [1]), prefix([[BOS, 3]]))),
        Case("greedy.case.other_ids", (_model(93, favour=3), src(3, 5, [5, 4, 3]),
                                       prefix([[3, 5, 4, 4], [3, 6, EOS, 7], [3, 8, 9, 10]])),
             {"bos_id": 3, "eos_id": 4}),
    ]


def _error(case: Case, exc: BaseException, line: str) -> str | None:
    text = str(exc)
    if "unexpected keyword" in text:
        return None  # the common hint names the argument
    if ("decode" in line or "encode" in line) and (isinstance(exc, TypeError)
                                                   or "memory" in text or "shape" in text):
        return t("greedy.err.interface")
    return None


def check_greedy_step(fn: Callable, *, lang: str | None = None) -> bool:
    """Check ``fn(model, src, prefix, bos_id=1, eos_id=2) -> next_ids``.

    Args:
        fn: the reader's greedy step. ``model`` is a
            :class:`minitransformer.Transformer` in eval mode (any model with
            ``src_mask``/``encode``/``decode`` would do); ``src`` ``(B, S)``
            int64 source ids padded with ``model.config.pad_id`` (0);
            ``prefix`` ``(B, t)`` the target so far, starting with ``bos_id``.
            Returns ``(B,)`` int64: for each row, the argmax of the logits at
            the last prefix position, computed with the source padding
            masked, never ``bos_id`` or PAD, and ``eos_id`` for a row whose
            prefix already contains ``eos_id``. The model must be left as it
            was (weights, buffers and eval mode).
        lang: language of the verdict; None for the current one.

    Tests: a long and a one-token prefix, a finished row, heavily padded
    sources, models whose logits favour BOS or PAD, batch 1 with a source of
    length 1, and ids other than the defaults (``bos_id=3, eos_id=4``).

    Returns:
        True if it agrees with the step of :func:`minitransformer.decoding.greedy_decode`.
    """
    return check("greedy_step", fn, _cases(), _reference, _mistakes(),
                 signature="fn(model, src, prefix, bos_id=1, eos_id=2)",
                 names=("name.next_tokens",), on_error=_error, fallback="greedy.fallback",
                 lang=lang)
