"""Catalogues of readers' answers for the language-model checkers (chapter 11):
top-p filtering, the next-token loss and BERT's masking rule.

Each wrong answer is written the way a reader would write it and is paired
with the id of the hint it must earn (``test_exercises_hints.py`` checks the
same answers in English and Chinese, and that every hint of these checkers
is earned by one of them); each unusual right answer must pass. The
checkers' references are compared with independent ones here: a nucleus
worked out by hand, ``F.cross_entropy`` and ``make_lm_batch``'s pairs, and
the package's ``mask_tokens`` passing the statistical check.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_hint, assert_passes, flat, run_checker

from minitransformer import mask_tokens
from minitransformer.data import make_lm_batch
from minitransformer.exercises import (
    check_bert_masking,
    check_next_token_loss,
    check_top_p_filter,
)
from minitransformer.exercises.locales.en import MESSAGES as ENGLISH
from minitransformer.lm.sampling import filter_logits
from minitransformer.training.loss import label_smoothed_cross_entropy


# ---------------------------------------------------------------- top-p filtering
def _nucleus(logits, top_p, *, descending=True, rule="before", top=True, renormalise=True):
    """A reader's nucleus filter: sort, cumulative sum, keep, scatter back."""
    probs = logits.softmax(dim=-1)
    sorted_p, idx = probs.sort(dim=-1, descending=descending)
    cum = sorted_p.cumsum(dim=-1)
    keep_sorted = (cum - sorted_p < top_p) if rule == "before" else (cum <= top_p)
    if top:
        keep_sorted[:, 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True) if renormalise else kept


def top_p_ok(logits, top_p):
    return _nucleus(logits, top_p)


def top_p_hf_style(logits, top_p):
    """Sorted ascending, drop the tokens whose mass, with all less probable ones,
    is at most 1 - p (the way Hugging Face writes it), then a softmax."""
    sorted_logits, idx = torch.sort(logits, descending=False)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cum <= 1 - top_p
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(1, idx, remove_sorted)
    return logits.masked_fill(remove, float("-inf")).softmax(dim=-1)


def top_p_loop(logits, top_p):
    """Row by row in Python, adding tokens until the mass reaches p."""
    out = torch.zeros_like(logits)
    for row, scores in enumerate(logits):
        probs = scores.softmax(dim=0)
        total = 0.0
        for i in probs.argsort(descending=True).tolist():
            out[row, i] = probs[i]
            total += float(probs[i])
            if total >= top_p:
                break
        out[row] /= out[row].sum()
    return out


def top_p_package(logits, top_p):
    return filter_logits(logits, top_p=top_p).softmax(dim=-1)


TOP_P_RIGHT = [top_p_ok, top_p_hf_style, top_p_loop, top_p_package]


def top_p_masked_logits(logits, top_p):
    keep = _nucleus(logits, top_p) > 0
    return logits.masked_fill(~keep, float("-inf"))


def top_p_no_renormalise(logits, top_p):
    return _nucleus(logits, top_p, renormalise=False)


def top_p_drops_the_crossing_token(logits, top_p):
    return _nucleus(logits, top_p, rule="upto")


def top_p_may_keep_nothing(logits, top_p):
    return _nucleus(logits, top_p, rule="upto", top=False)


def top_p_ascending(logits, top_p):
    return _nucleus(logits, top_p, descending=False, top=False)


def top_p_unsorted(logits, top_p):
    probs = logits.softmax(dim=-1)
    keep = probs.cumsum(dim=-1) - probs < top_p
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_logit_mass(logits, top_p):
    sorted_logits, idx = logits.sort(dim=-1, descending=True)
    keep_sorted = sorted_logits.cumsum(dim=-1) - sorted_logits < top_p
    keep_sorted[:, 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def top_p_as_top_k(logits, top_p):
    k = max(1, int(top_p * logits.shape[-1]))
    kth = logits.topk(k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf")).softmax(dim=-1)


def top_p_softmax_dim0(logits, top_p):
    probs = logits.softmax(dim=0)
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    keep_sorted = sorted_p.cumsum(dim=-1) - sorted_p < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_sort_reverse(logits, top_p):
    probs = logits.softmax(dim=-1)
    sorted_p, idx = torch.sort(probs, reverse=True)  # Python's sorted() keyword
    return sorted_p


def top_p_scatter_dtype(logits, top_p):
    probs = logits.softmax(dim=-1)
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    keep_sorted = sorted_p.cumsum(dim=-1) - sorted_p < top_p
    keep = torch.zeros_like(probs).scatter(-1, idx, keep_sorted)  # float self, bool src
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


#: (the reader's function, the id of the hint it must earn)
TOP_P_MISTAKES = [
    (top_p_masked_logits, "top_p.hint.logits"),
    (top_p_no_renormalise, "top_p.hint.no_renormalise"),
    (top_p_drops_the_crossing_token, "top_p.hint.drop_crossing"),
    (top_p_may_keep_nothing, "top_p.hint.no_top"),
    (top_p_ascending, "top_p.hint.ascending"),
    (top_p_unsorted, "top_p.hint.unsorted"),
    (top_p_logit_mass, "top_p.hint.logit_mass"),
    (top_p_as_top_k, "top_p.hint.top_k"),
    (top_p_softmax_dim0, "top_p.hint.axis"),
    (top_p_sort_reverse, "top_p.err.sort"),
    (top_p_scatter_dtype, "top_p.err.scatter"),
]


@pytest.mark.parametrize("fn", TOP_P_RIGHT, ids=lambda f: f.__name__)
def test_top_p_accepts_right_answers(fn, capsys):
    assert_passes(check_top_p_filter, fn, capsys)


@pytest.mark.parametrize("fn, hint", TOP_P_MISTAKES, ids=[h for _, h in TOP_P_MISTAKES])
def test_top_p_names_each_mistake(fn, hint, capsys):
    assert_hint(check_top_p_filter, fn, ENGLISH[hint], capsys)


def test_top_p_reference_is_the_nucleus_worked_out_by_hand():
    from minitransformer.exercises.sampling import _reference
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    # p = 0.7: 0.5 is short of it, 0.5 + 0.3 reaches it -> {0.5, 0.3}, renormalised
    torch.testing.assert_close(_reference(logits, 0.7), torch.tensor([[0.625, 0.375, 0, 0]]))
    # p = 0.4: the top token alone holds more than p, and it is kept
    torch.testing.assert_close(_reference(logits, 0.4), torch.tensor([[1.0, 0, 0, 0]]))
    torch.testing.assert_close(_reference(logits, 0.9),
                               torch.tensor([[0.5, 0.3, 0.15, 0]]) / 0.95)


def test_top_p_cases_keep_every_cumulative_sum_away_from_p():
    """So that rounding cannot decide whether a token is in (p = 1 keeps all)."""
    from minitransformer.exercises.sampling import _cases
    for case in _cases():
        logits, top_p = case.args
        if top_p == 1.0:
            continue
        cum = logits.double().softmax(-1).sort(-1, descending=True).values.cumsum(-1)
        assert float((cum - top_p).abs().min()) > 1e-3, case.label


# ---------------------------------------------------------------- next-token loss
def _flat_ce(logits, targets, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), **kw)


def loss_ok(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id)


def loss_transposed(logits, tokens, pad_id=0):
    """(B, V, L - 1) logits, as cross_entropy reads (N, C, ...)."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], ignore_index=pad_id)


def loss_by_hand(logits, tokens, pad_id=0):
    logp = logits[:, :-1].log_softmax(dim=-1)
    target = tokens[:, 1:]
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, L - 1)
    return nll[target != pad_id].mean()


def loss_package(logits, tokens, pad_id=0):
    return label_smoothed_cross_entropy(logits[:, :-1], tokens[:, 1:], 0.0, pad_id)


LOSS_RIGHT = [loss_ok, loss_transposed, loss_by_hand, loss_package]


def loss_not_shifted(logits, tokens, pad_id=0):
    return _flat_ce(logits, tokens, ignore_index=pad_id)


def loss_trimmed_not_shifted(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1], tokens[:, :-1], ignore_index=pad_id)


def loss_shifted_the_wrong_way(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, 1:], tokens[:, :-1], ignore_index=pad_id)


def loss_counts_padding(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1], tokens[:, 1:])


def loss_masks_by_input(logits, tokens, pad_id=0):
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return nll[tokens[:, :-1] != pad_id].mean()


def loss_mean_over_all(logits, tokens, pad_id=0):
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return (nll * (tokens[:, 1:] != pad_id)).mean()


def loss_sum(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id, reduction="sum")


def loss_per_sentence(logits, tokens, pad_id=0):
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    keep = tokens[:, 1:] != pad_id
    return ((nll * keep).sum(1) / keep.sum(1)).mean()


def loss_pad_zero(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1], tokens[:, 1:], ignore_index=0)


def loss_softmax_first(logits, tokens, pad_id=0):
    return _flat_ce(logits[:, :-1].softmax(dim=-1), tokens[:, 1:], ignore_index=pad_id)


def loss_nll_on_logits(logits, tokens, pad_id=0):
    v = logits.shape[-1]
    return F.nll_loss(logits[:, :-1].reshape(-1, v), tokens[:, 1:].reshape(-1),
                      ignore_index=pad_id)


def loss_three_dimensional(logits, tokens, pad_id=0):
    return F.cross_entropy(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id)


def loss_unshifted_targets_flat(logits, tokens, pad_id=0):
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), tokens.reshape(-1),
                           ignore_index=pad_id)


LOSS_MISTAKES = [
    (loss_not_shifted, "lm_loss.hint.not_shifted"),
    (loss_trimmed_not_shifted, "lm_loss.hint.not_shifted"),
    (loss_shifted_the_wrong_way, "lm_loss.hint.wrong_way"),
    (loss_counts_padding, "lm_loss.hint.pad_counted"),
    (loss_masks_by_input, "lm_loss.hint.input_pad"),
    (loss_mean_over_all, "lm_loss.hint.mean_all"),
    (loss_sum, "lm_loss.hint.sum"),
    (loss_per_sentence, "lm_loss.hint.sentences"),
    (loss_pad_zero, "lm_loss.hint.pad0"),
    (loss_softmax_first, "lm_loss.hint.double_softmax"),
    (loss_nll_on_logits, "lm_loss.hint.raw_nll"),
    (loss_three_dimensional, "lm_loss.err.flatten"),
    (loss_unshifted_targets_flat, "lm_loss.err.shapes"),
]


@pytest.mark.parametrize("fn", LOSS_RIGHT, ids=lambda f: f.__name__)
def test_next_token_loss_accepts_right_answers(fn, capsys):
    assert_passes(check_next_token_loss, fn, capsys)


@pytest.mark.parametrize("fn, hint", LOSS_MISTAKES, ids=[f.__name__ for f, _ in LOSS_MISTAKES])
def test_next_token_loss_names_each_mistake(fn, hint, capsys):
    assert_hint(check_next_token_loss, fn, ENGLISH[hint], capsys)


def test_next_token_loss_reference_is_make_lm_batch_and_pytorchs_cross_entropy():
    """The reference pairs what make_lm_batch pairs: its inputs are the row
    without its last token, its targets the row without its first."""
    from minitransformer.exercises.lm_loss import _reference
    sentences = [[5, 6, 7, 8], [9, 4], [6]]
    batch = make_lm_batch(sentences)  # inputs [BOS] + s, targets s + [EOS], padded with 0
    tokens = torch.cat([batch.inputs[:, :1], batch.targets], dim=1)  # the whole rows
    real = batch.targets != 0
    assert torch.equal(tokens[:, :-1][real], batch.inputs[real])
    logits = torch.randn(3, tokens.shape[1], 10)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 10), batch.targets.reshape(-1),
                               ignore_index=0)
    torch.testing.assert_close(_reference(logits, tokens), expected)


# ---------------------------------------------------------------- BERT's masking
def _ordinary(tokens, mask_id, special_ids):
    return ~torch.isin(tokens, torch.tensor([*special_ids, mask_id]))


def _pool(vocab_size, mask_id, special_ids):
    ids = torch.arange(vocab_size)
    return ids[~torch.isin(ids, torch.tensor([*special_ids, mask_id]))]


def _bert(tokens, mask_id, vocab_size, special_ids, p=0.15, *, exclude="all", p_used=None,
          above=False, everywhere=False, shares=(0.8, 0.1), overlap=False, pool="ordinary",
          labels="right"):
    """A reader's masking: one roll for choosing, one for 80/10/10."""
    if exclude == "all":
        ordinary = _ordinary(tokens, mask_id, special_ids)
    elif exclude == "pad":
        ordinary = tokens != special_ids[0]
    else:
        ordinary = torch.ones_like(tokens, dtype=torch.bool)
    u = torch.rand(tokens.shape)
    chance = p if p_used is None else p_used
    chosen = ((u >= chance) if above else (u < chance)) & ordinary
    roll = torch.rand(tokens.shape)
    target = ordinary if everywhere else chosen
    m, r = shares
    to_mask = target & (roll < m)
    if overlap:
        to_random = target & (torch.rand(tokens.shape) < r)
    else:
        to_random = target & (roll >= m) & (roll < m + r)
    ids = _pool(vocab_size, mask_id, special_ids) if pool == "ordinary" else \
        torch.arange(vocab_size)
    inputs = tokens.clone()
    inputs[to_mask] = mask_id
    inputs[to_random] = ids[torch.randint(len(ids), (int(to_random.sum()),))]
    if labels == "right":
        out = tokens.masked_fill(~chosen, -100)
    elif labels == "all":
        out = tokens.clone()
    elif labels == "zeros":
        out = tokens * chosen
    elif labels == "inverted":
        out = tokens.masked_fill(chosen, -100)
    else:  # the masked copy
        out = inputs.masked_fill(~chosen, -100)
    return inputs, out


def _knob(**kw):
    def fn(tokens, mask_id, vocab_size, special_ids, p=0.15):
        return _bert(tokens, mask_id, vocab_size, special_ids, p, **kw)
    return fn


def bert_ok(tokens, mask_id, vocab_size, special_ids, p=0.15):
    return _bert(tokens, mask_id, vocab_size, special_ids, p)


def bert_hf_style(tokens, mask_id, vocab_size, special_ids, p=0.15):
    """Bernoulli draws as Hugging Face's collator does: 80% of the chosen
    masked, half of the rest random."""
    chance = torch.full(tokens.shape, p)
    chance[~_ordinary(tokens, mask_id, special_ids)] = 0.0
    chosen = torch.bernoulli(chance).bool()
    labels = torch.where(chosen, tokens, -100)
    masked = torch.bernoulli(torch.full(tokens.shape, 0.8)).bool() & chosen
    random = torch.bernoulli(torch.full(tokens.shape, 0.5)).bool() & chosen & ~masked
    pool = _pool(vocab_size, mask_id, special_ids)
    inputs = torch.where(masked, mask_id, tokens)
    inputs = torch.where(random, pool[torch.randint(len(pool), tokens.shape)], inputs)
    return inputs, labels


def bert_exact_count(tokens, mask_id, vocab_size, special_ids, p=0.15):
    """Exactly round(p · n) of the n ordinary tokens, chosen by a permutation."""
    ordinary = _ordinary(tokens, mask_id, special_ids).flatten()
    where = ordinary.nonzero().squeeze(1)
    picked = where[torch.randperm(len(where))[: round(p * len(where))]]
    chosen = torch.zeros_like(ordinary)
    chosen[picked] = True
    chosen = chosen.view(tokens.shape)
    roll = torch.rand(tokens.shape)
    pool = _pool(vocab_size, mask_id, special_ids)
    inputs = torch.where(chosen & (roll < 0.8), mask_id, tokens)
    random = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs = torch.where(random, pool[torch.randint(len(pool), tokens.shape)], inputs)
    return inputs, torch.where(chosen, tokens, -100)


def bert_package(tokens, mask_id, vocab_size, special_ids, p=0.15):
    return mask_tokens(tokens, mask_id=mask_id, vocab_size=vocab_size, p=p,
                       special_ids=special_ids)


BERT_RIGHT = [bert_ok, bert_hf_style, bert_exact_count, bert_package]


def bert_in_on_a_tensor(tokens, mask_id, vocab_size, special_ids, p=0.15):
    special = tokens in special_ids
    return bert_ok(tokens.masked_fill(special, 0), mask_id, vocab_size, special_ids, p)


def bert_randint_without_a_tuple(tokens, mask_id, vocab_size, special_ids, p=0.15):
    inputs, labels = bert_ok(tokens, mask_id, vocab_size, special_ids, p)
    b, n = tokens.shape
    noise = torch.randint(len(special_ids), vocab_size, b, n)
    return torch.where(labels == -100, inputs, noise), labels


BERT_MISTAKES = [
    (_knob(labels="all"), "bert.hint.not_ignored"),
    (_knob(labels="zeros"), "bert.hint.not_ignored"),
    (_knob(labels="inverted"), "bert.hint.labels_inverted"),
    (_knob(labels="masked_copy"), "bert.hint.labels_corrupted"),
    (_knob(exclude="nothing"), "bert.hint.pad"),
    (_knob(exclude="pad"), "bert.hint.specials"),
    (_knob(above=True), "bert.hint.p_inverted"),
    (_knob(p_used=0.15), "bert.hint.p_fixed"),
    (_knob(everywhere=True), "bert.hint.all_tokens"),
    (_knob(pool="all"), "bert.hint.random_pool"),
    (_knob(shares=(1.0, 0.0)), "bert.hint.all_masked"),
    (_knob(shares=(0.8, 0.2)), "bert.hint.no_keep"),
    (_knob(shares=(0.8, 0.0)), "bert.hint.no_random"),
    (_knob(overlap=True), "bert.hint.overlap"),
    (_knob(shares=(0.7, 0.15)), "bert.hint.shares"),
    (bert_in_on_a_tensor, "bert.err.isin"),
    (bert_randint_without_a_tuple, "bert.err.randint"),
]
BERT_IDS = ["labels-all", "labels-zeros", "labels-inverted", "labels-masked-copy", "pad",
            "specials", "p-inverted", "p-fixed", "everywhere", "pool-all", "all-masked",
            "no-keep", "no-random", "overlap", "shares", "in-on-a-tensor", "randint"]


@pytest.mark.parametrize("fn", BERT_RIGHT, ids=lambda f: f.__name__)
def test_bert_masking_accepts_right_answers(fn, capsys):
    assert_passes(check_bert_masking, fn, capsys)


@pytest.mark.parametrize("fn, hint", BERT_MISTAKES, ids=BERT_IDS)
def test_bert_masking_names_each_mistake(fn, hint, capsys):
    assert_hint(check_bert_masking, fn, ENGLISH[hint], capsys)


def test_a_wrong_masking_is_not_called_random(capsys):
    """The checker expects a random answer: a wrong one is told its mistake,
    never that it "returns different results for the same input"."""
    ok, out = run_checker(check_bert_masking, _knob(shares=(1.0, 0.0)), capsys)
    assert not ok and ENGLISH["harness.random"][:40] not in out


def test_the_right_masking_passes_every_time(capsys):
    """The statistical bounds are wide enough (6 standard deviations) that 30
    checks of a right answer all pass."""
    for _ in range(30):
        assert check_bert_masking(bert_ok)
    capsys.readouterr()


def bert_one_replacement(tokens, mask_id, vocab_size, special_ids, p=0.15):
    """Every random replacement the same ordinary id: no listed mistake."""
    inputs, labels = bert_ok(tokens, mask_id, vocab_size, special_ids, p)
    random = (labels != -100) & (inputs != mask_id) & (inputs != tokens)
    return inputs.masked_fill(random, int(_pool(vocab_size, mask_id, special_ids)[0])), labels


def test_an_unexplained_wrong_masking_gets_the_rule_not_a_difference(capsys):
    """No entry of a random result compares with the reference's, so the
    verdict states the rule instead of a "largest difference"."""
    ok, out = run_checker(check_bert_masking, bert_one_replacement, capsys)
    assert not ok and flat(ENGLISH["bert.fallback"]) in flat(out), out
    assert "largest" not in out and "differ" not in out


def bert_chooses_nothing(tokens, mask_id, vocab_size, special_ids, p=0.15):
    return tokens.clone(), torch.full_like(tokens, -100)


def test_a_masking_that_chooses_nothing_is_not_told_about_the_shares(capsys):
    ok, out = run_checker(check_bert_masking, bert_chooses_nothing, capsys)
    assert not ok and flat(ENGLISH["bert.fallback"]) in flat(out), out
