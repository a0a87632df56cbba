"""Generating text with a language model: temperature, top-k, top-p, and the cache.

- :func:`sample_next` turns next-token logits into ids: greedy (the argmax)
  at ``temperature=0``, otherwise a draw from ``softmax(logits / T)``,
  restricted to the ``top_k`` most probable ids and/or to the nucleus
  (Holtzman et al. 2020): the smallest set of most probable ids whose
  probabilities sum to at least ``top_p``.
- :func:`generate` extends a prompt token by token. With ``use_cache`` the
  model's key/value cache (:meth:`~minitransformer.lm.models.LanguageModel.step`)
  makes each new token cost one position; without it, the whole sequence is
  run again at every step. Both give the same tokens (tested).

Shape letters: ``B`` rows, ``P`` prompt length, ``N`` new tokens, ``V``
vocabulary size.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..checks import check_int_at_least, check_positive_int, check_tokens

__all__ = ["filter_logits", "sample_next", "generate"]


def _check_sampling(temperature: float, top_k: int | None, top_p: float | None,
                    where: str) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not temperature >= 0 or temperature == float("inf"):
        raise ValueError(f"{where}: temperature must be a finite number >= 0 "
                         f"(0 = greedy), got {temperature!r}")
    if top_k is not None:
        check_positive_int(top_k, "top_k", where)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise ValueError(f"{where}: top_p must be in (0, 1] or None, got {top_p!r}")


def filter_logits(logits: Tensor, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """``(B, V)`` logits with every id outside the top ``top_k`` and outside
    the nucleus of mass ``top_p`` set to ``-inf`` (a new tensor).

    The nucleus is the smallest set of most probable ids whose probabilities
    (``softmax(logits)``) sum to at least ``top_p``: an id is kept when the
    ids more probable than it sum to less than ``top_p``. Ties at the border
    are broken by sort order. The most probable id is always kept.
    """
    out = logits.clone()
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (B, 1)
        out = out.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(out, dim=-1, descending=True)
        probs = sorted_logits.float().softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the more probable ids
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


def sample_next(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Choose the next id of each row.

    Args:
        logits: ``(B, V)`` next-token scores.
        temperature: ``0`` = greedy (the argmax); otherwise the logits are
            divided by it before the softmax (below 1 sharper, above 1 flatter).
        top_k: keep only the ``top_k`` most probable ids (``1`` = greedy).
        top_p: keep only the nucleus of mass ``top_p`` (see :func:`filter_logits`).
        generator: the random source; a fixed one gives the same ids.

    Returns: ``(B,)`` int64 ids.
    """
    where = "sample_next"
    _check_sampling(temperature, top_k, top_p, where)
    if not isinstance(logits, Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError(f"{where}: logits must be a (B, V) float tensor, got "
                         f"{tuple(getattr(logits, 'shape', ()))}")
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1)
    kept = filter_logits(logits.float() / temperature, top_k, top_p)
    probs = kept.softmax(dim=-1)  # (B, V), zero outside the kept ids
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@torch.inference_mode()
def generate(
    model: nn.Module,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Extend each row of ``prompt`` by up to ``max_new_tokens`` tokens.

    Args:
        model: a :class:`~minitransformer.lm.models.LanguageModel`
            (``use_cache`` needs its ``start``/``step``; any model with
            ``model(tokens) -> (B, L, V)`` next-token logits works without).
        prompt: ``(B, P)`` int64 ids, no padding (every row the same length;
            a sentence's prompt usually starts with BOS).
        max_new_tokens: at most this many new tokens (the model's
            ``config.max_len`` bounds ``P + N``).
        temperature, top_k, top_p, generator: as in :func:`sample_next`.
        eos_id: a row stops after producing it, and is padded with the
            model's ``pad_id`` from then on; generation ends when every row
            has stopped.
        use_cache: feed one new token per step through the key/value cache
            (False: run the whole sequence again at every step; the same ids).

    Returns: ``(B, P + N)`` ids, the prompt followed by the new tokens
    (``N <= max_new_tokens``; the padding id is never generated). The model
    runs in eval mode (restored after).
    """
    where = "generate"
    _check_sampling(temperature, top_k, top_p, where)
    check_int_at_least(max_new_tokens, 0, "max_new_tokens", where)
    config = getattr(model, "config", None)
    max_len = getattr(config, "max_len", None)
    check_tokens(prompt, "prompt", where, max_len)
    if prompt.shape[1] == 0:
        raise ValueError(f"{where}: the prompt is empty; start it with BOS")
    if max_len is not None and prompt.shape[1] + max_new_tokens > max_len:
        raise ValueError(f"{where}: {prompt.shape[1]} prompt tokens + {max_new_tokens} new "
                         f"ones exceed the model's max_len={max_len}")
    pad_id = getattr(config, "pad_id", 0)
    if use_cache and not hasattr(model, "step"):
        raise ValueError(f"{where}: use_cache needs a model with start()/step() "
                         f"(a LanguageModel); {type(model).__name__} has none")
    was_training = model.training
    model.eval()
    try:
        return _generate(model, prompt, max_new_tokens, pad_id, eos_id, use_cache,
                         dict(temperature=temperature, top_k=top_k, top_p=top_p,
                              generator=generator))
    finally:
        model.train(was_training)


def _generate(model: nn.Module, prompt: Tensor, steps: int, pad_id: int, eos_id: int | None,
              use_cache: bool, sampling: dict) -> Tensor:
    """The loop of :func:`generate` (arguments checked)."""
    sequence = prompt
    done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    if use_cache:
        state = model.start(prompt.shape[0])
        logits, state = model.step(prompt, state)  # the prompt in one pass
    for i in range(steps):
        if not use_cache:
            logits = model(sequence)  # (B, L, V): the whole sequence again
        last = logits[:, -1].clone()  # (B, V)
        last[:, pad_id] = float("-inf")  # padding is never generated
        ids = sample_next(last, **sampling)  # (B,)
        ids = ids.masked_fill(done, pad_id)
        sequence = torch.cat([sequence, ids[:, None]], dim=1)
        if eos_id is not None:
            done |= ids == eos_id
            if bool(done.all()):
                break
        if use_cache and i + 1 < steps:
            logits, state = model.step(ids[:, None], state)
    return sequence
