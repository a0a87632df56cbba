"""Hints that name the reader's real mistake (issue 25, "Checker hints").

Each wrong answer below is written as a reader would write it; its verdict
must name that mistake (the message id's text, in English and in Chinese),
and, where an earlier version blamed a term the reader got right, must not
say that any more.
"""

from __future__ import annotations

import math

import pytest
import test_exercises_lm as lm_answers
import test_exercises_modern as modern_answers
import torch
import torch.nn.functional as F
from exercise_helpers import flat, run_checker

import minitransformer.exercises as ex
from minitransformer.exercises import _messages
from minitransformer.exercises._text import VERDICT_WIDTH, text_width


def _split(x, num_heads, strided=False):
    """(B, L, D) -> (B, H, L, Dh): slices, or every H-th feature (strided)."""
    b, n, d = x.shape
    if strided:
        return x.view(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2)
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)


def _merge(x, strided=False):
    """(B, H, L, Dh) -> (B, L, D): the inverse of :func:`_split`."""
    b, h, n, dh = x.shape
    if strided:
        return x.permute(0, 2, 3, 1).reshape(b, n, h * dh)
    return x.transpose(1, 2).reshape(b, n, h * dh)


# ---------------------------------------------------------------- multi-head attention
def _mha(strided_split=False, strided_merge=False, mask_after=False, divide_by_dh=False,
         w_o_untransposed=False, heads_swapped=False):
    def fn(query, key, value, w_q, w_k, w_v, w_o, num_heads, mask=None):
        b, lq, d = query.shape
        dh = d // num_heads

        def heads(x):
            if heads_swapped:  # view(B, L, Dh, H): Dh "heads" of width H
                return x.view(x.shape[0], x.shape[1], dh, num_heads).transpose(1, 2)
            return _split(x, num_heads, strided_split)

        q, k, v = heads(query @ w_q.T), heads(key @ w_k.T), heads(value @ w_v.T)
        scores = q @ k.transpose(-2, -1) / (dh if divide_by_dh else math.sqrt(dh))
        if mask is not None and not mask_after:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if mask is not None and mask_after:
            weights = weights.masked_fill(~mask, 0.0)
        out = weights @ v
        out = out.transpose(1, 2).reshape(b, lq, d) if heads_swapped else _merge(
            out, strided_merge)
        return (out @ w_o if w_o_untransposed else out @ w_o.T), weights
    return fn


# ---------------------------------------------------------------- KV-cache step
def _kv(strided_split=False, strided_merge=False, axis=-1, full_mask=False, reproject=False,
        merge_with_reshape=False, heads_swapped=False):
    def fn(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
        b, _, d = x.shape
        if reproject:  # "project the keys and values", the cached ones too
            cache_k = _split(_merge(cache_k) @ w_k.T, num_heads)
            cache_v = _split(_merge(cache_v) @ w_v.T, num_heads)
        def heads(t):
            if heads_swapped:  # view(B, 1, Dh, H): does not fit the (B, H, t, Dh) cache
                return t.view(b, 1, d // num_heads, num_heads).transpose(1, 2)
            return _split(t, num_heads, strided_split)

        k = torch.cat([cache_k, heads(x @ w_k.T)], dim=2)
        v = torch.cat([cache_v, heads(x @ w_v.T)], dim=2)
        q = heads(x @ w_q.T)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
        if full_mask:  # the causal mask of the whole prefix, as in training
            n = k.shape[2]
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(),
                                        float("-inf"))
        out = scores.softmax(dim=axis) @ v
        if merge_with_reshape:
            out = out.transpose(1, 2).reshape(b, 1, d)
        else:
            out = _merge(out, strided_merge)
        return out @ w_o.T, k, v
    return fn


def kv_no_key_transpose(x, cache_k, cache_v, w_q, w_k, w_v, w_o, num_heads):
    b, _, d = x.shape
    k = torch.cat([cache_k, _split(x @ w_k.T, num_heads)], dim=2)
    v = torch.cat([cache_v, _split(x @ w_v.T, num_heads)], dim=2)
    scores = _split(x @ w_q.T, num_heads) @ k / math.sqrt(d // num_heads)
    return _merge(scores.softmax(-1) @ v) @ w_o.T, k, v


# ---------------------------------------------------------------- warm-up schedule
def lr_precedence_everywhere(step, d_model, warmup_steps=4000):
    return d_model ** -1/2 * min(step ** -1/2, step * warmup_steps ** -3/2)  # noqa: E226


def lr_precedence_d_model(step, d_model, warmup_steps=4000):
    return d_model ** -1/2 * min(step ** -0.5, step * warmup_steps ** -1.5)  # noqa: E226


def lr_no_step_factor(step, d_model, warmup_steps=4000):
    return d_model ** -0.5 * min(step ** -0.5, warmup_steps ** -1.5)


def lr_rounded(step, d_model, warmup_steps=4000):
    return round(d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5), 6)


def lr_three_significant_digits(step, d_model, warmup_steps=4000):
    return float(f"{d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5):.3g}")


def lr_exponential_decay(step, d_model, warmup_steps=4000):
    peak = (d_model * warmup_steps) ** -0.5
    if step <= warmup_steps:
        return peak * step / warmup_steps
    return peak * math.exp(-(step - warmup_steps) / 10_000)


def lr_linear_decay(step, d_model, warmup_steps=4000):
    peak = (d_model * warmup_steps) ** -0.5
    if step <= warmup_steps:
        return peak * step / warmup_steps
    return peak * max(0.0, 1 - (step - warmup_steps) / 2_000_000)


# ---------------------------------------------------------------- sinusoidal encoding
def _pe(angle_of, dtype=torch.float32):
    def fn(max_len, d_model):
        pos = torch.arange(max_len, dtype=dtype)[:, None]
        two_i = torch.arange(0, d_model, 2, dtype=dtype)
        angle = angle_of(pos, two_i, d_model)
        pe = torch.zeros(max_len, d_model, dtype=dtype)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
        return pe
    return fn


pe_multiplied_float32 = _pe(lambda pos, two_i, d: pos * torch.pow(10000.0, two_i / d))
pe_multiplied_exp_float32 = _pe(lambda pos, two_i, d: pos * torch.exp(two_i * math.log(10000.0)
                                                                      / d))
pe_log10 = _pe(lambda pos, two_i, d: pos * torch.exp(-two_i * math.log10(10000.0) / d))


# ---------------------------------------------------------------- right terms not blamed
def ms_softmax_dim1(scores, mask):
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=1).nan_to_num(0.0)


def sdpa_softmax_dim0(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = scores.softmax(dim=0).nan_to_num(0.0)
    return w @ v, w


def ffn_w2_transposed(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2 + b2


def ffn_w1_transposed(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2.T + b2


def ffn_linear_w2_transposed(x, w1, b1, w2, b2):
    return F.linear(torch.relu(F.linear(x, w1, b1)), w2.T, b2)


#: (checker, the reader's function, the id of the hint it must get, texts it must not contain)
CASES = [
    (ex.check_multi_head_attention, _mha(strided_split=True, strided_merge=True),
     "mha.hint.split_strided", ()),
    (ex.check_multi_head_attention, _mha(strided_split=True), "mha.hint.split_strided", ()),
    (ex.check_multi_head_attention, _mha(mask_after=True), "mha.hint.mask_after", ()),
    (ex.check_multi_head_attention, _mha(divide_by_dh=True), "mha.hint.scale_dh", ()),
    (ex.check_multi_head_attention, _mha(w_o_untransposed=True), "mha.hint.w_o_untransposed",
     ()),
    (ex.check_multi_head_attention, _mha(heads_swapped=True), "mha.hint.split_swapped", ()),
    (ex.check_multi_head_attention, _mha(strided_merge=True), "mha.hint.merge_strided", ()),
    (ex.check_kv_cache_step, _kv(strided_split=True, strided_merge=True),
     "kv.hint.split_strided", ()),
    (ex.check_kv_cache_step, _kv(strided_split=True), "kv.hint.split_strided", ()),
    (ex.check_kv_cache_step, _kv(axis=-2), "kv.hint.axis", ()),
    (ex.check_kv_cache_step, _kv(axis=1), "kv.hint.axis", ()),
    (ex.check_kv_cache_step, kv_no_key_transpose, "kv.err.key_transpose", ()),
    (ex.check_kv_cache_step, _kv(full_mask=True), "kv.hint.full_mask", ()),
    (ex.check_kv_cache_step, _kv(full_mask=True, merge_with_reshape=True), "kv.hint.full_mask",
     ()),
    (ex.check_kv_cache_step, _kv(reproject=True), "kv.hint.reproject", ()),
    (ex.check_kv_cache_step, _kv(heads_swapped=True), "kv.err.split_shape", ("kv.err.cat_dim",)),
    (ex.check_warmup_schedule, lr_precedence_everywhere, "warmup.hint.precedence", ()),
    (ex.check_warmup_schedule, lr_precedence_d_model, "warmup.hint.precedence", ()),
    (ex.check_warmup_schedule, lr_no_step_factor, "warmup.hint.no_step", ()),
    (ex.check_warmup_schedule, lr_rounded, "warmup.hint.rounded", ()),
    (ex.check_warmup_schedule, lr_three_significant_digits, "warmup.hint.rounded", ()),
    (ex.check_warmup_schedule, lr_exponential_decay, "warmup.hint.decay_form", ()),
    (ex.check_warmup_schedule, lr_linear_decay, "warmup.hint.decay_form", ()),
    (ex.check_sinusoidal_encoding, pe_multiplied_float32, "pe.hint.multiply", ()),
    (ex.check_sinusoidal_encoding, pe_multiplied_exp_float32, "pe.hint.multiply", ()),
    (ex.check_sinusoidal_encoding, pe_log10, "pe.hint.log10", ()),
    (ex.check_masked_softmax, ms_softmax_dim1, "ms.hint.axis", ("ms.hint.implicit_dim",)),
    (ex.check_scaled_dot_product_attention, sdpa_softmax_dim0, "sdpa.hint.axis",
     ("sdpa.hint.implicit_dim",)),
    (ex.check_feed_forward, ffn_w2_transposed, "ffn.err.transpose_w2", ("ffn.err.transpose",)),
    (ex.check_feed_forward, ffn_w1_transposed, "ffn.err.transpose", ("ffn.err.transpose_w2",)),
    (ex.check_feed_forward, ffn_linear_w2_transposed, "ffn.err.linear_transposed",
     ("ffn.err.transpose",)),
    # chapter 11: every hint of these three checkers, each earned by a reader's answer
    *[(ex.check_top_p_filter, fn, hint, ()) for fn, hint in lm_answers.TOP_P_MISTAKES],
    *[(ex.check_next_token_loss, fn, hint, ()) for fn, hint in lm_answers.LOSS_MISTAKES],
    *[(ex.check_bert_masking, fn, hint, ()) for fn, hint in lm_answers.BERT_MISTAKES],
    # chapter 12: the same for its four checkers
    *[(ex.check_rms_norm, fn, hint, ()) for fn, hint in modern_answers.RMS_MISTAKES],
    *[(ex.check_rope, fn, hint, ()) for fn, hint in modern_answers.ROPE_MISTAKES],
    *[(ex.check_expand_kv_heads, fn, hint, ()) for fn, hint in modern_answers.EXPAND_MISTAKES],
    *[(ex.check_online_softmax_merge, fn, hint, ())
      for fn, hint in modern_answers.MERGE_MISTAKES],
]
IDS = [f"{fn.__name__ if fn.__name__ != 'fn' else checker.__name__}-{hint}"
       for checker, fn, hint, _ in CASES]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("checker, fn, hint, not_said", CASES, ids=IDS)
def test_the_verdict_names_the_real_mistake(checker, fn, hint, not_said, lang, capsys):
    ok, out = run_checker(checker, fn, capsys, lang=lang)
    messages = _messages.catalogue(lang)
    assert not ok
    assert flat(messages[hint]) in flat(out), f"expected {hint!r} ({lang}), got:\n{out}"
    for wrong in not_said:
        assert flat(messages[wrong]) not in flat(out), f"blamed {wrong!r}:\n{out}"
    assert all(text_width(line) <= VERDICT_WIDTH for line in out.splitlines()), out


@pytest.mark.parametrize("area", ["top_p", "lm_loss", "bert", "rms", "rope", "gqa", "online"])
def test_every_hint_of_the_language_model_checkers_is_earned_by_a_readers_answer(area):
    """Each hint and error hint of chapter 11's and 12's checkers is what some wrong answer
    written as a reader would write it gets (above), so none is dead text."""
    hints = {k for k in _messages.catalogue("en")
             if k.startswith((f"{area}.hint.", f"{area}.err."))}
    earned = {hint for _, _, hint, _ in CASES}
    assert hints and hints <= earned, sorted(hints - earned)


def test_the_float32_multiplied_table_differs_from_the_float64_one():
    """The point of comparing in the reader's precision: a float32 table of the
    "multiplied" mistake is not the float64 one within the checker's tolerance,
    yet it is named (above)."""
    n, d = 50, 16
    low = pe_multiplied_float32(n, d).double()
    high = _pe(lambda pos, two_i, dm: pos * torch.pow(10000.0, two_i / dm), torch.float64)(n, d)
    assert (low - high).abs().max() > 1e-3
