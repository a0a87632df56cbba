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
generated (their log-probabilities are set to -inf), nor are the ids in
``banned_ids``: :func:`translate` bans the tokenizer's unknown id, so no
``<unk>`` can reach its output, whatever the model prefers. Scores are the
model's log-probabilities (``log_softmax`` over the whole vocabulary, the
banned ids included, so banning changes which hypotheses survive, not their
scores).

Shape letters: ``B`` sentences, ``K`` beam size, ``N`` rows being decoded,
``S`` source length, ``T`` target length, ``V`` target vocabulary size.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .checks import check_int_at_least, check_positive_int, check_source_batch
from .seq2seq import IncrementalDecoder, reorder_tensors

__all__ = [
    "MAX_ROWS",
    "PrefixDecoder",
    "incremental_decoder",
    "greedy_decode",
    "beam_search",
    "gnmt_length_penalty",
    "sequence_log_prob",
    "translate",
    "corpus_bleu",
]


#: Default bound of :func:`translate` on the rows (sentences × beam) decoded
#: together: 128 sentences with beam 4, or one sentence with beam 1,000.
MAX_ROWS = 1024

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


def _next_log_probs(logits: Tensor, banned: Sequence[int]) -> Tensor:
    """``(N, V)`` logits → log-probabilities with the ``banned`` ids at -inf."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs[:, list(banned)] = float("-inf")
    return log_probs


def _search_arguments(
    model: nn.Module,
    src: Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    banned_ids: Sequence[int],
    where: str,
) -> list[int]:
    """Check what both searches take and return the sorted ids a search never
    generates: BOS, the model's padding id and ``banned_ids``. Ids are checked
    against the target vocabulary when the model's config names its size
    (``tgt_vocab_size``), and some id must be left to generate."""
    check_source_batch(src, where)
    check_positive_int(max_len, "max_len", where)
    config = getattr(model, "config", None)
    pad_id = getattr(config, "pad_id", None)
    vocab = getattr(config, "tgt_vocab_size", None)
    for name, i in (("bos_id", bos_id), ("eos_id", eos_id)):
        check_int_at_least(i, 0, name, where)
        if vocab is not None and i >= vocab:
            raise ValueError(f"{where}: {name} {i} is outside the target vocabulary [0, {vocab})")
    banned = {bos_id, *banned_ids} | ({pad_id} if pad_id is not None else set())
    for i in banned:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"{where}: banned ids must be non-negative ints, got {i!r}")
        if vocab is not None and i >= vocab:
            raise ValueError(
                f"{where}: banned id {i} is outside the target vocabulary [0, {vocab})"
            )
    if vocab is not None and len(banned) >= vocab:
        raise ValueError(
            f"{where}: BOS, padding and banned_ids ban all {vocab} ids of the target "
            "vocabulary: there is nothing left to generate"
        )
    return sorted(banned)


def _check_length_penalty(alpha: Any, max_len: int, where: str) -> None:
    """``alpha`` must be a finite number whose penalty at the longest
    hypothesis, ``((5 + max_len) / 6) ** alpha``, lies in [1e-100, 1e100],
    so that no score overflows or divides by zero."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise ValueError(f"{where}: length_penalty must be a finite number, got {alpha!r}")
    log10_lp = alpha * math.log10((5.0 + max_len) / 6.0)  # lp(1) = 1: the extreme is at max_len
    if abs(log10_lp) > 100:
        raise ValueError(
            f"{where}: length_penalty {alpha} gives ((5 + {max_len}) / 6) ** {alpha} = "
            f"1e{log10_lp:+.0f}, beyond [1e-100, 1e100]; use a small alpha (GNMT: 0.6)"
        )


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
    banned_ids: Sequence[int] = (),
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
        banned_ids: ids never generated, besides BOS and padding (e.g. the
            unknown id).

    Returns:
        ``B`` lists of token ids, without BOS and EOS. A sentence that has
        produced EOS leaves the batch (its rows of the state are dropped with
        ``reorder_state``), and decoding stops when none is left.
    """
    banned = _search_arguments(model, src, max_len, bos_id, eos_id, banned_ids, "greedy_decode")
    banned = torch.tensor(banned, device=src.device)
    with _inference(model):
        stepper, state = _start(model, src, use_cache)
        b = src.shape[0]
        generated = torch.full((b, max_len), eos_id, dtype=torch.long, device=src.device)
        active = torch.arange(b, device=src.device)  # (N,) sentence of each row still decoding
        tokens = torch.full((b,), bos_id, dtype=torch.long, device=src.device)  # (N,)
        for t in range(max_len):
            logits, state = stepper.decode_next(tokens, state)  # (N, V)
            # in place: a copy of the (N, V) logits at every step costs as much as the argmax
            tokens = logits.index_fill_(1, banned, float("-inf")).argmax(dim=-1)  # (N,)
            generated[active, t] = tokens
            finished = tokens == eos_id
            if bool(finished.any()):  # finished sentences leave the batch
                keep = (~finished).nonzero().squeeze(1)
                if keep.numel() == 0:
                    break
                active, tokens = active[keep], tokens[keep]
                state = stepper.reorder_state(state, keep)
        out = generated.tolist()  # (B, max_len)
    return [row[: row.index(eos_id)] if eos_id in row else row for row in out]


# --------------------------------------------------------------------------- scoring


def gnmt_length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's length penalty ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al.
    2016, eq. 14). ``|Y|`` counts the generated tokens, EOS included.
    ``alpha = 0`` ranks by raw log-probability (which favours short outputs);
    a larger ``alpha`` favours longer ones."""
    return ((5.0 + length) / 6.0) ** alpha


# --------------------------------------------------------------------------- beam search


def beam_search(
    model: nn.Module,
    src: Tensor,
    beam_size: int = 4,
    max_len: int = 100,
    length_penalty: float = 0.6,
    bos_id: int = 1,
    eos_id: int = 2,
    use_cache: bool = True,
    banned_ids: Sequence[int] = (),
) -> list[list[int]]:
    """Beam search over a batch of sentences (Wu et al. 2016, section 7).

    Each sentence keeps ``K = beam_size`` live prefixes. At each step every
    live prefix is extended by every token; of the ``K·V`` candidates the
    best ``2K`` (by summed log-probability) are looked at in order:

    - a candidate ending in EOS that ranks among the first ``K`` is a
      *finished* hypothesis, scored ``log P(Y | X) / lp(Y)``
      (:func:`gnmt_length_penalty` with ``alpha = length_penalty``);
    - the first ``K`` candidates that do not end in EOS are the next live
      prefixes (there are always ``K``: at most ``K`` candidates end in EOS).

    A sentence is done once it has ``K`` finished hypotheses (or after
    ``max_len`` steps, when its live prefixes are finished as they are); its
    rows then leave the batch. This is the rule of fairseq and of Hugging
    Face's default: a good short hypothesis does not stop the search while
    longer ones, which the length penalty may favour, are still competing.
    It is a heuristic, not an exact search: with ``length_penalty > 0`` a
    live prefix could still overtake the finished ones after the sentence is
    done, so beam search can (rarely) score below greedy search.

    Args:
        model: a seq2seq model; its incremental hooks are used if it has them
            and ``use_cache``, otherwise the whole prefix is recomputed.
        src: source ids ``(B, S)``, padded.
        beam_size: ``K``; 1 gives the same tokens as :func:`greedy_decode`.
        max_len: at most this many tokens per hypothesis, EOS included.
        length_penalty: GNMT's ``alpha`` (0.6 in GNMT; 0 = raw log-probability).
        bos_id, eos_id: the target's begin/end-of-sentence ids.
        banned_ids: ids never generated, besides BOS and padding.

    Returns:
        For each sentence, the token ids (without BOS/EOS) of its finished
        hypothesis with the best score.
    """
    check_positive_int(beam_size, "beam_size", "beam_search")
    banned = _search_arguments(model, src, max_len, bos_id, eos_id, banned_ids, "beam_search")
    _check_length_penalty(length_penalty, max_len, "beam_search")
    k, device = beam_size, src.device
    b = src.shape[0]
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    with _inference(model):
        stepper, state = _start(model, src, use_cache)
        # Rows are (sentence, beam) pairs, sentence-major: row a·K + j.
        state = stepper.reorder_state(state, torch.arange(b, device=device).repeat_interleave(k))
        alive = torch.arange(b, device=device)  # (A,) sentence of each active group
        scores = torch.full((b, k), float("-inf"), device=device)  # (A, K) log P of each beam
        scores[:, 0] = 0.0  # at the start only one beam is real
        tokens = torch.full((b * k,), bos_id, dtype=torch.long, device=device)  # (A·K,)
        history = torch.empty((b * k, 0), dtype=torch.long, device=device)  # (A·K, t)
        for t in range(1, max_len + 1):
            logits, state = stepper.decode_next(tokens, state)  # (A·K, V)
            vocab = logits.shape[-1]
            a = alive.numel()
            log_probs = _next_log_probs(logits, banned).view(a, k, vocab)
            cand = (scores[:, :, None] + log_probs).view(a, k * vocab)  # (A, K·V)
            top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=1)  # (A, 2K)
            top_beam, top_tok = top_idx // vocab, top_idx % vocab
            is_eos = top_tok == eos_id
            rank = torch.arange(top_idx.shape[1], device=device)
            # 1. finished hypotheses: EOS among the first K candidates
            new_finished = is_eos & (rank < k) & torch.isfinite(top_scores)
            for g, j in new_finished.nonzero().tolist():
                done = finished[int(alive[g])]
                if len(done) < k:
                    row = g * k + int(top_beam[g, j])
                    score = float(top_scores[g, j]) / gnmt_length_penalty(t, length_penalty)
                    done.append((score, history[row].tolist()))
            # 2. the next live prefixes: the first K candidates not ending in EOS
            keep = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # (A, K)
            scores = top_scores.gather(1, keep)
            rows = (torch.arange(a, device=device)[:, None] * k + top_beam.gather(1, keep))
            tokens = top_tok.gather(1, keep)  # (A, K)
            history = torch.cat([history[rows.view(-1)], tokens.view(-1, 1)], dim=1)
            # 3. sentences that are done leave the batch
            if t == max_len:  # cut: the live prefixes are finished as they are
                for g in range(a):
                    done = finished[int(alive[g])]
                    for j in range(k):
                        if len(done) < k and bool(torch.isfinite(scores[g, j])):
                            score = float(scores[g, j]) / gnmt_length_penalty(t, length_penalty)
                            done.append((score, history[g * k + j].tolist()))
                break
            active = torch.tensor([len(finished[int(s)]) < k for s in alive], device=device)
            if not bool(active.any()):
                break
            if not bool(active.all()):
                alive, scores = alive[active], scores[active]
                rows, tokens = rows[active], tokens[active]
                history = history.view(a, k, -1)[active].view(-1, history.shape[1])
            state = stepper.reorder_state(state, rows.view(-1))
            tokens = tokens.view(-1)
    return [max(done, key=lambda h: h[0])[1] for done in finished]


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
    check_source_batch(src, "sequence_log_prob")
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


# --------------------------------------------------------------------------- text in, text out


def translate(
    model: nn.Module,
    sentences: Sequence[str],
    src_vocab,
    tgt_vocab,
    beam_size: int = 1,
    extra_len: int = 50,
    batch_size: int = 128,
    length_penalty: float = 0.6,
    lowercase: bool = True,
    device: torch.device | str | None = None,
    use_cache: bool = True,
    max_rows: int = MAX_ROWS,
    ban_unknown: bool = True,
) -> list[str]:
    """Translate raw sentences: encode, decode, turn the ids back into text.

    Sentences are decoded in batches of similar source length (sorted, then
    put back in the input order), each with ``max_len`` = its batch's longest
    source + ``extra_len`` (capped by the model's ``config.max_len``); a source
    is cut to ``config.max_len`` tokens, or to ``config.max_src_len`` where the
    config has one (:class:`~minitransformer.lm.PromptedLanguageModel`). A batch
    holds at most ``batch_size`` sentences and at most ``max_rows`` rows
    (sentences × beam size), which bounds the memory of a decoding step: the
    candidate scores take ``rows × V`` floats and the key/value cache grows
    with ``rows × layers × length × d_model``.

    Args:
        model: a trained seq2seq model.
        sentences: source sentences, one string each (an empty or blank one
            gives an empty translation).
        src_vocab, tgt_vocab: the tokenizers used in training
            (:class:`~minitransformer.data.WordTokenizer`,
            :class:`~minitransformer.data.SubwordTokenizer`), or the word
            :class:`~minitransformer.data.Vocab` of each side. BOS/EOS ids
            come from the target's tokenizer.
        beam_size: 1 = :func:`greedy_decode`, more = :func:`beam_search`.
        extra_len: target length allowed beyond the source length.
        batch_size: sentences decoded together.
        length_penalty: GNMT's alpha for beam search.
        lowercase: for word vocabularies only: tokenise lower-cased (as the
            vocabularies were built).
        device: where to run (default: where the model's parameters are).
        use_cache: see :func:`greedy_decode`.
        max_rows: at most this many rows decoded together (at least
            ``beam_size``): ``beam_size = 1000`` decodes one sentence at a time.
        ban_unknown: never generate the target tokenizer's unknown id (a
            word model then writes its best known word where it would have
            written ``<unk>``; a subword model needs no unknown id at all).

    Returns:
        one translation per input sentence, in order.
    """
    from .data import as_tokenizer

    if isinstance(sentences, str):
        raise TypeError("translate: expected a list of sentences, got a single string")
    check_positive_int(beam_size, "beam_size", "translate")
    check_positive_int(batch_size, "batch_size", "translate")
    check_positive_int(max_rows, "max_rows", "translate")
    if beam_size > max_rows:
        raise ValueError(
            f"translate: beam_size {beam_size} is larger than max_rows {max_rows}, the rows "
            "decoded at once (which bound the memory)"
        )
    batch_size = min(batch_size, max_rows // beam_size)
    src_tok, tgt_tok = as_tokenizer(src_vocab, lowercase), as_tokenizer(tgt_vocab, lowercase)
    if device is None:
        device = next(model.parameters()).device
    pad_id = model.config.pad_id
    limit = getattr(model.config, "max_len", None)
    # a source may have room for more tokens than a target (a prompted language model)
    src_limit = getattr(model.config, "max_src_len", limit)
    encoded = [src_tok.encode(s) if s.strip() else [] for s in sentences]
    if src_limit is not None:
        encoded = [ids[:src_limit] for ids in encoded]
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    out = [""] * len(encoded)
    bos, eos = tgt_tok.bos_id, tgt_tok.eos_id
    banned = [tgt_tok.unk_id] if ban_unknown else []
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        longest = max(len(encoded[i]) for i in chunk)
        src = torch.full((len(chunk), longest), pad_id, dtype=torch.long)
        for r, i in enumerate(chunk):
            src[r, : len(encoded[i])] = torch.tensor(encoded[i])
        src = src.to(device)
        max_len = longest + extra_len if limit is None else min(longest + extra_len, limit)
        if beam_size == 1:
            ids = greedy_decode(model, src, max_len, bos, eos, use_cache, banned)
        else:
            ids = beam_search(
                model, src, beam_size, max_len, length_penalty, bos, eos, use_cache, banned
            )
        for i, hyp in zip(chunk, ids, strict=True):
            out[i] = tgt_tok.decode(hyp)
    return out


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
