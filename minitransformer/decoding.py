"""Turning a trained seq2seq model into translations: greedy and beam search, BLEU.

- Greedy search: at each step take the most probable next token.
- Beam search (as in Wu et al. 2016, "Google's Neural Machine Translation
  System", section 7): keep the ``K`` best prefixes; rank finished
  hypotheses by ``log P(Y | X) / lp(Y)`` with the length penalty
  ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (no coverage penalty).
- BLEU (Papineni et al. 2002) at corpus level with sacreBLEU (Post 2018), on
  detokenised, lowercased text.

Both searches work with any model of the package's seq2seq interface
(:mod:`minitransformer.seq2seq`). A model with the incremental hooks
(``start_decoding`` / ``decode_next`` / ``reorder_state``, the Transformer's
key/value cache) is fed one token per step; any other model, or
``use_cache=False``, re-runs ``model.decode`` on the whole prefix at every
step (:class:`PrefixDecoder`), which gives the same tokens, only slower.

Conventions: outputs are lists of token ids without BOS and EOS. ``max_len``
counts generated tokens, EOS included: a hypothesis that has not produced
EOS after ``max_len`` tokens is cut there. The padding and BOS ids are never
generated (their log-probabilities are set to -inf). Scores are the model's
log-probabilities (``log_softmax`` over the whole vocabulary).

Shape letters: ``B`` sentences, ``K`` beam size, ``N`` rows being decoded,
``S`` source length, ``T`` target length, ``V`` target vocabulary size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .seq2seq import IncrementalDecoder, reorder_tensors

__all__ = [
    "PrefixDecoder",
    "incremental_decoder",
    "greedy_decode",
    "length_penalty",
    "sequence_log_prob",
    "corpus_bleu",
]


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _inference(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no autograd inside the block; the model's
    training flag is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _check_src(src: Any, where: str) -> None:
    if not isinstance(src, Tensor):
        raise TypeError(f"{where}: src must be a tensor of token ids, got {type(src).__name__}")
    if src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(
            f"{where}: src must be int64 token ids of shape (batch, len), got "
            f"dtype {src.dtype} and shape {tuple(src.shape)}"
        )


def _check_positive(value: Any, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")


def _next_log_probs(logits: Tensor, banned: Sequence[int]) -> Tensor:
    """``(N, V)`` logits → log-probabilities with the ``banned`` ids at -inf."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs[:, list(banned)] = float("-inf")
    return log_probs


def _banned_ids(model: nn.Module, bos_id: int) -> list[int]:
    pad_id = getattr(getattr(model, "config", None), "pad_id", None)
    return sorted({bos_id} | ({pad_id} if pad_id is not None else set()))


# --------------------------------------------------------------------------- stepping


class PrefixDecoder:
    """The incremental hooks for *any* seq2seq model, by recomputation.

    The state is the prefix fed so far ``(N, t)`` with the memory and its
    mask; ``decode_next`` appends the new tokens and returns the last
    position of ``model.decode(prefix, memory, memory_mask)``. Step ``t``
    therefore costs ``t`` positions (the whole decode is quadratic in the
    length): the reference the key/value cache is tested against, and the
    fallback for models without hooks.
    """

    def __init__(self, model: nn.Module):
        self.model = model

    def start_decoding(self, memory: Any, memory_mask: Tensor | None = None) -> dict:
        return {"prefix": None, "memory": memory, "memory_mask": memory_mask}

    def decode_next(self, tokens: Tensor, state: dict) -> tuple[Tensor, dict]:
        tokens = tokens[:, None]  # (N, 1)
        prefix = tokens if state["prefix"] is None else torch.cat([state["prefix"], tokens], 1)
        logits = self.model.decode(prefix, state["memory"], state["memory_mask"])  # (N, t, V)
        return logits[:, -1], {**state, "prefix": prefix}

    def reorder_state(self, state: dict, index: Tensor) -> dict:
        return reorder_tensors(state, index)


def incremental_decoder(model: nn.Module, use_cache: bool = True) -> IncrementalDecoder:
    """The object whose hooks the searches call: ``model`` itself when it has
    the incremental hooks and ``use_cache``, else a :class:`PrefixDecoder`."""
    if use_cache and isinstance(model, IncrementalDecoder):
        return model
    return PrefixDecoder(model)


def _start(model: nn.Module, src: Tensor, use_cache: bool) -> tuple[IncrementalDecoder, Any]:
    """Encode ``src`` once and return the stepper with its initial state."""
    stepper = incremental_decoder(model, use_cache)
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    return stepper, stepper.start_decoding(memory, src_mask)


# --------------------------------------------------------------------------- greedy


def greedy_decode(
    model: nn.Module,
    src: Tensor,
    max_len: int = 100,
    bos_id: int = 1,
    eos_id: int = 2,
    use_cache: bool = True,
) -> list[list[int]]:
    """Greedy search: feed BOS, then always the most probable next token.

    Args:
        model: a seq2seq model (:class:`~minitransformer.seq2seq.Seq2SeqModel`);
            run in eval mode without gradients, its mode is restored after.
        src: source ids ``(B, S)`` padded with ``model.config.pad_id``.
        max_len: at most this many tokens are generated per sentence (EOS
            included).
        bos_id, eos_id: the target's begin/end-of-sentence ids.
        use_cache: use the model's incremental hooks (the Transformer's
            key/value cache) if it has them; False recomputes the whole prefix
            at every step (same tokens, slower).

    Returns:
        ``B`` lists of token ids, without BOS and EOS. Decoding stops as soon
        as every sentence has produced EOS.
    """
    where = "greedy_decode"
    _check_src(src, where)
    _check_positive(max_len, "max_len", where)
    banned = _banned_ids(model, bos_id)
    with _inference(model):
        stepper, state = _start(model, src, use_cache)
        b = src.shape[0]
        tokens = torch.full((b,), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(b, dtype=torch.bool, device=src.device)
        steps = []
        for _ in range(max_len):
            logits, state = stepper.decode_next(tokens, state)  # (B, V)
            tokens = _next_log_probs(logits, banned).argmax(dim=-1)  # (B,)
            tokens = tokens.masked_fill(finished, eos_id)  # finished rows keep emitting EOS
            steps.append(tokens)
            finished |= tokens == eos_id
            if bool(finished.all()):
                break
        out = torch.stack(steps, dim=1).tolist()  # (B, T)
    return [row[: row.index(eos_id)] if eos_id in row else row for row in out]


# --------------------------------------------------------------------------- scoring


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's length penalty ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al.
    2016, eq. 14). ``alpha = 0`` ranks by raw log-probability (favours short
    outputs); larger ``alpha`` favours longer ones."""
    return ((5.0 + length) / 6.0) ** alpha


def sequence_log_prob(
    model: nn.Module,
    src: Tensor,
    hypotheses: Sequence[Sequence[int]],
    bos_id: int = 1,
    eos_id: int = 2,
    max_len: int | None = None,
) -> list[float]:
    """``log P(Y | X)`` of each hypothesis under the model, teacher forced
    (independent of the searches): the sum of the log-probabilities of its
    tokens and of the final EOS. A hypothesis of ``max_len`` tokens was cut
    by the search without EOS, so its EOS is not counted when ``max_len`` is
    given."""
    _check_src(src, "sequence_log_prob")
    if len(hypotheses) != src.shape[0]:
        raise ValueError(
            f"sequence_log_prob: {src.shape[0]} sources but {len(hypotheses)} hypotheses"
        )
    pad_id = model.config.pad_id
    scores = []
    with _inference(model):
        for i, hyp in enumerate(hypotheses):
            ended = max_len is None or len(hyp) < max_len
            target = list(hyp) + ([eos_id] if ended else [])
            tgt_in = torch.tensor([[bos_id, *target[:-1]]], device=src.device)
            row = src[i : i + 1]
            row = row[:, : int((row != pad_id).sum())] if (row != pad_id).any() else row
            log_probs = torch.log_softmax(model(row, tgt_in).float(), dim=-1)[0]  # (T, V)
            idx = torch.tensor(target, device=src.device)
            scores.append(float(log_probs.gather(1, idx[:, None]).sum()))
    return scores


# --------------------------------------------------------------------------- BLEU


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], verbose: bool = False):
    """Corpus-level BLEU with sacreBLEU: one reference per sentence,
    lowercased, sacreBLEU's own ``13a`` tokenisation of detokenised text.

    Args:
        hypotheses: detokenised system outputs, one string per sentence.
        references: detokenised references, aligned with ``hypotheses``.
        verbose: print the score and its signature.

    Returns:
        a ``sacrebleu`` ``BLEUScore`` (``.score`` in 0..100, ``.precisions``,
        ``.bp``...), with an extra attribute ``signature``: the sacreBLEU
        signature string (``nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:...``)
        to report next to the number so it can be reproduced.
    """
    from sacrebleu.metrics import BLEU

    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("corpus_bleu: expected lists of sentences, got a single string")
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"corpus_bleu: {len(hypotheses)} hypotheses but {len(references)} references; "
            "they must be aligned one to one"
        )
    bleu = BLEU(lowercase=True)
    score = bleu.corpus_score(hypotheses, [references])
    score.signature = str(bleu.get_signature())
    if verbose:
        print(f"{score}\nsignature: {score.signature}")
    return score
