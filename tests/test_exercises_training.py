"""Catalogues of readers' answers for the training and decoding checkers: the
label-smoothed loss, the warm-up learning-rate schedule and one greedy
decoding step.

Each wrong answer is written the way a struggling reader would write it; the
test asserts that it is rejected and that the hint names its mistake. Each
unusual right answer must pass.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_hint, assert_passes, run_checker

from minitransformer import Transformer, TransformerConfig
from minitransformer.decoding import greedy_decode
from minitransformer.exercises import (
    check_greedy_step,
    check_label_smoothing_loss,
    check_warmup_schedule,
)
from minitransformer.training import learning_rate


# ---------------------------------------------------------------- label smoothing
def ls_ok(logits, target, smoothing=0.1, pad_id=0):
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    per_token = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    keep = target != pad_id
    return per_token[keep].mean()


def ls_torch(logits, target, smoothing=0.1, pad_id=0):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=pad_id, label_smoothing=smoothing)


def ls_kl_plus_entropy(logits, target, smoothing=0.1, pad_id=0):
    """KL to the smoothed target plus the target's entropy = the cross-entropy."""
    v = logits.shape[-1]
    q = torch.full_like(logits, smoothing / v).scatter(
        -1, target.unsqueeze(-1), 1 - smoothing + smoothing / v)
    kl = F.kl_div(logits.log_softmax(-1), q, reduction="none").sum(-1)
    entropy = -torch.xlogy(q, q).sum(-1)  # 0 · log 0 = 0 (smoothing 0)
    keep = target != pad_id
    return ((kl + entropy) * keep).sum() / keep.sum()


def ls_explicit_target(logits, target, smoothing=0.1, pad_id=0):
    return _ls()(logits, target, smoothing, pad_id)


LS_RIGHT = [ls_ok, ls_torch, ls_kl_plus_entropy, ls_explicit_target]


@pytest.mark.parametrize("fn", LS_RIGHT, ids=lambda f: f.__name__)
def test_label_smoothing_accepts_right_answers(fn, capsys):
    assert_passes(check_label_smoothing_loss, fn, capsys)


def test_label_smoothing_reference_is_pytorchs():
    from minitransformer.exercises.loss import _reference
    logits, target = torch.randn(3, 4, 9), torch.randint(0, 9, (3, 4))
    expected = F.cross_entropy(logits.reshape(-1, 9), target.reshape(-1), ignore_index=0,
                               label_smoothing=0.2)
    torch.testing.assert_close(_reference(logits, target, 0.2, 0), expected)


def _ls(spread="V", kl=False, reduce="tokens", swap=False, sum_uniform=False,
        ignore_pad=True, pad0=False, smooth=True, naive=False, nll_weight=None):
    """A reader's loss built from an explicit target distribution q."""
    def fn(logits, target, smoothing=0.1, pad_id=0):
        eps = smoothing if smooth else 0.0
        pad = 0 if pad0 else pad_id
        v = logits.shape[-1]
        logp = logits.softmax(-1).log() if naive else logits.log_softmax(-1)
        one_hot = F.one_hot(target, v).to(logp.dtype)
        if spread == "V":
            q = (1 - eps) * one_hot + eps / v
        elif spread == "V-1":
            q = (1 - eps) * one_hot + eps / (v - 1) * (1 - one_hot)
        else:  # "V-2": neither the true token nor padding
            q = (1 - eps) * one_hot + eps / (v - 2) * (1 - one_hot)
            q[..., pad] = 0.0
        if swap:
            q = eps * one_hot + (1 - eps) / v
        per_token = -(q * logp).sum(-1)
        if sum_uniform:
            per_token = -(1 - eps) * (one_hot * logp).sum(-1) - eps * logp.sum(-1)
        if nll_weight is not None:
            per_token = -nll_weight * (one_hot * logp).sum(-1) - eps * logp.mean(-1)
        if kl:
            per_token = per_token + (q * torch.log(q.clamp(min=1e-30))).sum(-1)
        keep = (target != pad) if ignore_pad else torch.ones_like(target, dtype=torch.bool)
        kept = per_token * keep
        if reduce == "sum":
            return kept.sum()
        if reduce == "numel":
            return kept.sum() / target.numel()
        if reduce == "sentences":
            return (kept.sum(1) / keep.sum(1)).mean()
        return kept.sum() / keep.sum()
    return fn


def ls_cross_entropy_3d(logits, target, smoothing=0.1, pad_id=0):
    return F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=smoothing)


def ls_smoothing_keyword(logits, target, smoothing=0.1, pad_id=0):
    v = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, v), target.reshape(-1), ignore_index=pad_id,
                           smoothing=smoothing)


LS_MISTAKES = [
    (_ls(smooth=False), "you did not apply the smoothing"),
    (_ls(swap=True), "you swapped ε and 1 − ε"),
    (_ls(ignore_pad=False), "you counted the padding positions"),
    (_ls(reduce="numel"), "you divided by all B·T positions"),
    (_ls(reduce="sum"), "you returned the sum"),
    (_ls(reduce="sentences"), "you averaged each sentence"),
    (_ls(nll_weight=1.0), "you did not multiply the NLL term by (1 − ε)"),
    (_ls(spread="V-1"), "over the V − 1 wrong tokens"),
    (_ls(spread="V-2"), "V − 2 tokens"),
    (_ls(kl=True), "KL divergence"),
    (_ls(sum_uniform=True), "you summed the uniform part over the vocabulary"),
    (_ls(pad0=True), "instead of the pad_id argument"),
    (_ls(naive=True), "log_softmax"),
    (ls_cross_entropy_3d, "F.cross_entropy reads (B, T, V) logits as (N, C, ...)"),
    (ls_smoothing_keyword, "label_smoothing=, not smoothing="),
]


@pytest.mark.parametrize("fn, fragment", LS_MISTAKES, ids=[f for _, f in LS_MISTAKES])
def test_label_smoothing_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_label_smoothing_loss, fn, fragment, capsys)


# ---------------------------------------------------------------- warm-up schedule
def lr_ok(step, d_model, warmup_steps=4000):
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def lr_piecewise(step, d_model, warmup_steps=4000):
    if step < warmup_steps:
        return step / warmup_steps * (d_model * warmup_steps) ** -0.5
    return (d_model * step) ** -0.5


def lr_tensor(step, d_model, warmup_steps=4000):
    s = torch.tensor(float(step), dtype=torch.float64)
    return torch.rsqrt(torch.tensor(float(d_model))) * torch.minimum(s.rsqrt(),
                                                                    s * warmup_steps**-1.5)


def lr_package(step, d_model, warmup_steps=4000):
    """The package's schedule, whose knob is the peak (d_model · warmup)^-0.5."""
    return learning_rate(step, (d_model * warmup_steps) ** -0.5, "noam", warmup_steps)


WARMUP_RIGHT = [lr_ok, lr_piecewise, lr_tensor, lr_package]


@pytest.mark.parametrize("fn", WARMUP_RIGHT, ids=lambda f: f.__name__)
def test_warmup_accepts_right_answers(fn, capsys):
    assert_passes(check_warmup_schedule, fn, capsys)


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (64, 100), (16, 1)])
def test_package_schedule_is_the_papers_closed_form(d_model, warmup):
    """minitransformer.training.learning_rate with the paper's peak equals
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), written out here."""
    peak = (d_model * warmup) ** -0.5
    for step in (1, 2, warmup // 2 + 1, warmup, warmup + 1, 10 * warmup, 10**6):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert math.isclose(learning_rate(step, peak, "noam", warmup), expected, rel_tol=1e-9)


def _lr(combine=min, d_exp=-0.5, w_exp=-1.5, decay=-0.5, fixed=None, shift=0):
    def fn(step, d_model, warmup_steps=4000):
        w = warmup_steps if fixed is None else fixed
        s = step + shift
        return d_model**d_exp * combine(s**decay, s * w**w_exp)
    return fn


def lr_peak_one(step, d_model, warmup_steps=4000):
    return min(step / warmup_steps, (warmup_steps / step) ** 0.5)


def lr_list(step, d_model, warmup_steps=4000):
    return [lr_ok(step, d_model, warmup_steps)]


WARMUP_MISTAKES = [
    (_lr(combine=max), "you took the max of the two terms"),
    (_lr(d_exp=0.5), "d_model enters as d_model^-0.5"),
    (_lr(d_exp=-1.0), "d_model enters as d_model^-0.5"),
    (_lr(d_exp=0.0), "you left out the factor d_model^-0.5"),
    (_lr(w_exp=-0.5), "the warm-up term is step · warmup_steps^-1.5"),
    (_lr(w_exp=1.5), "the warm-up term is step · warmup_steps^-1.5"),
    (_lr(decay=-1.0), "decays as step^-0.5"),
    (_lr(fixed=4000), "you ignored the warmup_steps argument"),
    (_lr(shift=1), "steps count from 1"),
    (_lr(shift=-1), "steps count from 1"),
    (lr_peak_one, "the shape is right but the scale is not"),
    (lr_list, "expected a number"),
]


@pytest.mark.parametrize("fn, fragment", WARMUP_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(WARMUP_MISTAKES)])
def test_warmup_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_warmup_schedule, fn, fragment, capsys)


# ---------------------------------------------------------------- greedy step
def _step(first=False, extra_bos=False, drop_last=False, memory_mask=True, ban=("bos", "pad"),
          finished="eos", whole=False, axis=-1, bos=None, eos=None):
    def fn(model, src, prefix, bos_id=1, eos_id=2):
        bos_id = bos_id if bos is None else bos
        eos_id = eos_id if eos is None else eos
        with torch.no_grad():
            mask = model.src_mask(src)
            memory = model.encode(src, mask)
            tgt = prefix
            if extra_bos:
                tgt = torch.cat([torch.full((len(prefix), 1), bos_id), prefix], 1)
            if drop_last and tgt.shape[1] > 1:
                tgt = tgt[:, :-1]
            logits = model.decode(tgt, memory, mask if memory_mask else None)
            last = logits[:, 0 if first else -1].clone()
            banned = [{"bos": bos_id, "pad": model.config.pad_id}[b] for b in ban]
            if banned:
                last[:, banned] = float("-inf")
            nxt = last.argmax(dim=axis)
            done = (prefix == eos_id).any(dim=1)
            if finished == "eos":
                nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
            elif finished == "pad":
                nxt = torch.where(done, torch.zeros_like(nxt), nxt)
            return torch.cat([prefix, nxt[:, None]], 1) if whole else nxt
    return fn


def greedy_log_probs(model, src, prefix, bos_id=1, eos_id=2):
    """Through log-probabilities and index_fill, as greedy_decode does."""
    model.eval()  # already in eval mode: a no-op
    with torch.no_grad():
        memory = model.encode(src)
        log_p = model.decode(prefix, memory, model.src_mask(src))[:, -1].log_softmax(-1)
    banned = torch.tensor([bos_id, model.config.pad_id])
    best = log_p.index_fill(1, banned, -math.inf).topk(1, dim=-1).indices.squeeze(1)
    return torch.where((prefix == eos_id).any(1), eos_id, best)


def greedy_incremental(model, src, prefix, bos_id=1, eos_id=2):
    """The model's key/value-cache hooks, fed the prefix one token at a time."""
    with torch.no_grad():
        mask = model.src_mask(src)
        state = model.start_decoding(model.encode(src, mask), mask)
        for t in range(prefix.shape[1]):
            logits, state = model.decode_next(prefix[:, t], state)
    logits = logits.clone()
    logits[:, [bos_id, model.config.pad_id]] = -math.inf
    return logits.argmax(-1).masked_fill((prefix == eos_id).any(1), eos_id)


def greedy_plain(model, src, prefix, bos_id=1, eos_id=2):
    return _step()(model, src, prefix, bos_id, eos_id)


GREEDY_RIGHT = [greedy_plain, greedy_log_probs, greedy_incremental]


@pytest.mark.parametrize("fn", GREEDY_RIGHT, ids=lambda f: f.__name__)
def test_greedy_step_accepts_right_answers(fn, capsys):
    assert_passes(check_greedy_step, fn, capsys)


def test_greedy_step_repeated_is_greedy_decode(one_thread):
    """The step the checker expects is the step of decoding.greedy_decode."""
    model = Transformer(TransformerConfig(15, 15, d_model=16, num_heads=2,
                                          num_encoder_layers=1, num_decoder_layers=1,
                                          d_ff=32, dropout=0.0)).eval()
    with torch.no_grad():
        model.generator.weight.normal_(0, 2.0)
        model.generator.bias[0] = 3.0  # tempt the step to emit PAD
    src = torch.randint(3, 15, (4, 6))
    src[1, 3:] = 0
    expected = greedy_decode(model, src, max_len=8)
    prefix = torch.ones(4, 1, dtype=torch.long)
    step = _step()
    for _ in range(8):
        prefix = torch.cat([prefix, step(model, src, prefix)[:, None]], 1)
    got = [row[1:] for row in prefix.tolist()]
    got = [row[: row.index(2)] if 2 in row else row for row in got]
    assert got == expected


def greedy_edits_model(model, src, prefix, bos_id=1, eos_id=2):
    with torch.no_grad():
        model.generator.bias[[bos_id, model.config.pad_id]] = -math.inf  # ban them "for good"
        mask = model.src_mask(src)
        logits = model.decode(prefix, model.encode(src, mask), mask)[:, -1]
    return logits.argmax(-1).masked_fill((prefix == eos_id).any(1), eos_id)


def greedy_train_mode(model, src, prefix, bos_id=1, eos_id=2):
    model.train()  # "the model must be ready"
    return _step()(model, src, prefix, bos_id, eos_id)


def greedy_wrong_keyword(model, src, prefix, bos_id=1, eos_id=2):
    mask = model.src_mask(src)
    memory = model.encode(src, mask)
    logits = model.decode(prefix, memory, src_mask=mask)
    return logits[:, -1].argmax(-1)


def greedy_sampling(model, src, prefix, bos_id=1, eos_id=2):
    with torch.no_grad():
        mask = model.src_mask(src)
        logits = model.decode(prefix, model.encode(src, mask), mask)[:, -1]
    logits[:, [bos_id, model.config.pad_id]] = -math.inf
    nxt = torch.multinomial(logits.softmax(-1), 1).squeeze(1)  # sampled, not the argmax
    return nxt.masked_fill((prefix == eos_id).any(1), eos_id)


GREEDY_MISTAKES = [
    (_step(whole=True), "you returned the extended prefix"),
    (_step(axis=0, finished="none"), "argmax over the wrong axis"),
    (_step(first=True), "at the first position"),
    (_step(extra_bos=True), "you added BOS again"),
    (_step(drop_last=True), "you dropped the last token of the prefix"),
    (_step(memory_mask=False), "you did not mask the source padding"),
    (_step(ban=()), "BOS or PAD was chosen"),
    (_step(ban=("bos",)), "PAD was chosen: ban it too"),
    (_step(ban=("pad",)), "BOS was chosen: ban bos_id too"),
    (_step(bos=1), "you banned id 1, not the bos_id argument"),
    (_step(eos=2), "not the eos_id argument"),
    (_step(finished="none"), "make it emit EOS again"),
    (_step(finished="pad"), "not PAD"),
    (greedy_edits_model, "changed the model's weights or buffers"),
    (greedy_train_mode, "switched the model to training mode"),
    (greedy_wrong_keyword, "has no argument 'src_mask'"),
    (greedy_sampling, "different results for the same input"),
]


@pytest.mark.parametrize("fn, fragment", GREEDY_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(GREEDY_MISTAKES)])
def test_greedy_step_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_greedy_step, fn, fragment, capsys)


def test_greedy_step_leaves_the_model_as_it_was(capsys):
    """A step that edits the model is caught before its edit can change the
    reference, and the checker's model is restored for the next case."""
    ok, out = run_checker(check_greedy_step, greedy_edits_model, capsys)
    assert not ok and "first step" not in out  # caught on the first case
    assert_passes(check_greedy_step, _step(), capsys)
