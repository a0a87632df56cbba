"""Catalogues of readers' answers for chapter 12's checkers: RMSNorm, rotary
positions, grouped-query attention's key/value heads and the online
softmax's merge of two blocks.

Each wrong answer is written the way a reader would write it and is paired
with the id of the hint it must earn (``test_exercises_hints.py`` checks the
same answers in English and Chinese, and that every hint of these checkers
is earned by one of them); each unusual right answer must pass. The
checkers' references are compared with independent ones here:
``torch.nn.RMSNorm``, a rotation matrix built pair by pair,
``F.scaled_dot_product_attention(..., enable_gqa=True)`` and
``torch.softmax`` over the full row of scores.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from exercise_helpers import assert_hint, assert_passes

from minitransformer import apply_rotary, rms_norm
from minitransformer.exercises import (
    check_expand_kv_heads,
    check_online_softmax_merge,
    check_rms_norm,
    check_rope,
)
from minitransformer.exercises.locales.en import MESSAGES as ENGLISH


# ---------------------------------------------------------------- RMSNorm
def rms_ok(x, weight, eps=1e-5):
    ms = x.pow(2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * weight


def rms_rsqrt_norm(x, weight, eps=1e-5):
    """Through the Euclidean norm: √mean(x²) = ‖x‖ / √D."""
    d = x.shape[-1]
    ms = torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d
    return weight * x * torch.rsqrt(ms + eps)


def rms_module(x, weight, eps=1e-5):
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def rms_functional(x, weight, eps=1e-5):
    return F.rms_norm(x, x.shape[-1:], weight, eps)


RMS_RIGHT = [rms_ok, rms_rsqrt_norm, rms_module, rms_functional,
             lambda x, w, eps=1e-6: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w]


def rms_centered(x, weight, eps=1e-5):
    x = x - x.mean(-1, keepdim=True)  # as in LayerNorm
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_std(x, weight, eps=1e-5):
    return x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * weight


def rms_torch_std(x, weight, eps=1e-5):
    return x / (x.std(-1, keepdim=True) + eps) * weight


def rms_eps_outside(x, weight, eps=1e-5):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def rms_no_sqrt(x, weight, eps=1e-5):
    return x / (x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_sum(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


def rms_norm_not_rms(x, weight, eps=1e-5):
    return x / (x.norm(dim=-1, keepdim=True) + eps) * weight


def rms_mean_squared(x, weight, eps=1e-5):
    return x / torch.sqrt(x.mean(-1, keepdim=True) ** 2 + eps) * weight


def rms_no_eps(x, weight, eps=1e-5):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * weight


def rms_eps_hard_coded(x, weight, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def rms_no_weight(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_one_plus_weight(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight)


def rms_weight_first(x, weight, eps=1e-5):
    x = x * weight
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_whole_tensor(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean() + eps) * weight


def rms_over_length(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-2, keepdim=True) + eps) * weight


def rms_no_keepdim(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1) + eps) * weight


RMS_MISTAKES = [
    (rms_centered, "rms.hint.centered"),
    (rms_std, "rms.hint.std"),
    (rms_torch_std, "rms.hint.std"),
    (rms_eps_outside, "rms.hint.eps_outside"),
    (rms_no_sqrt, "rms.hint.no_sqrt"),
    (rms_sum, "rms.hint.sum"),
    (rms_norm_not_rms, "rms.hint.sum"),
    (rms_mean_squared, "rms.hint.mean_squared"),
    (rms_no_eps, "rms.hint.no_eps"),
    (rms_eps_hard_coded, "rms.hint.eps_fixed"),
    (rms_no_weight, "rms.hint.no_weight"),
    (rms_one_plus_weight, "rms.hint.one_plus"),
    (rms_weight_first, "rms.hint.weight_before"),
    (rms_whole_tensor, "rms.hint.axis_all"),
    (rms_over_length, "rms.hint.axis_len"),
    (rms_no_keepdim, "rms.err.keepdim"),
]


@pytest.mark.parametrize("fn", RMS_RIGHT, ids=lambda f: f.__name__)
def test_rms_norm_accepts_right_answers(fn, capsys):
    assert_passes(check_rms_norm, fn, capsys)


@pytest.mark.filterwarnings("ignore:std\\(\\). degrees of freedom")
@pytest.mark.parametrize("fn, hint", RMS_MISTAKES, ids=[f.__name__ for f, _ in RMS_MISTAKES])
def test_rms_norm_names_each_mistake(fn, hint, capsys):
    assert_hint(check_rms_norm, fn, ENGLISH[hint], capsys)


def test_rms_norm_reference_is_pytorchs_rmsnorm():
    from minitransformer.exercises.rmsnorm import _cases, _reference
    for case in _cases():
        x, weight = case.args
        eps = case.kwargs.get("eps", 1e-5)
        norm = torch.nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
        with torch.no_grad():
            norm.weight.copy_(weight)
            torch.testing.assert_close(_reference(x, weight, **case.kwargs), norm(x))
        torch.testing.assert_close(rms_norm(x, weight, eps), norm(x).detach())


# ---------------------------------------------------------------- rotary positions
def _angles(positions, dh, base):
    theta = base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)  # (Dh/2,)
    return positions.double()[:, None] * theta  # (L, Dh/2)


def rope_ok(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x.chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def rope_rotate_half(x, positions, base=10000.0):
    """Hugging Face's form: x · cos + rotate_half(x) · sin, angles repeated to Dh."""
    dh = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dh, 2).float() / dh))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    a, b = x[..., : dh // 2], x[..., dh // 2:]
    rotated = torch.cat([-b, a], dim=-1)
    return x * emb.cos().to(x.dtype) + rotated * emb.sin().to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    """The halves as the real and imaginary parts, multiplied by e^{i·angle}."""
    dh = x.shape[-1]
    angle = _angles(positions, dh, base)
    z = torch.complex(x[..., : dh // 2].double(), x[..., dh // 2:].double())
    z = z * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_package(x, positions, base=10000.0):
    return apply_rotary(x, positions, base)


ROPE_RIGHT = [rope_ok, rope_rotate_half, rope_complex, rope_package]


def _rope(pairs="halves", sign=1, exponent=lambda i2, dh: -i2 / dh, positions_of=None,
          degrees=False, first_only=False, swap=False, along_heads=False, base_used=None):
    """A reader's rotary positions, with one choice made wrongly."""
    def fn(x, positions, base=10000.0):
        dh = x.shape[-1]
        pos = positions if positions_of is None else positions_of(x, positions)
        b = base if base_used is None else base_used
        theta = b ** exponent(torch.arange(0, dh, 2, dtype=torch.float32), dh)
        angle = pos.float()[:, None] * theta
        if degrees:
            angle = torch.deg2rad(angle)
        cos, sin = angle.cos(), sign * angle.sin()
        if swap:
            cos, sin = sin, cos
        if along_heads:  # x read as (B, L, H, Dh)
            cos, sin = cos[:, None, :], sin[:, None, :]
        if pairs == "halves":
            a, c = x[..., : dh // 2], x[..., dh // 2:]
        else:
            a, c = x[..., 0::2], x[..., 1::2]
        new_a, new_c = a * cos - c * sin, (a * sin + c * cos) if not first_only else c
        if pairs == "halves":
            return torch.cat([new_a, new_c], dim=-1)
        return torch.stack([new_a, new_c], dim=-1).flatten(-2)
    return fn


def rope_cos_width_half(x, positions, base=10000.0):
    """rotate_half's form with cos and sin left at width Dh/2."""
    dh = x.shape[-1]
    angle = positions.float()[:, None] * base ** (-torch.arange(0, dh, 2).float() / dh)
    rotated = torch.cat([-x[..., dh // 2:], x[..., : dh // 2]], dim=-1)
    return x * angle.cos() + rotated * angle.sin()


ROPE_MISTAKES = [
    (_rope(pairs="interleaved"), "rope.hint.interleaved"),
    (_rope(sign=-1), "rope.hint.direction"),
    (_rope(exponent=lambda i2, dh: i2 / dh), "rope.hint.not_inverted"),
    (_rope(exponent=lambda i2, dh: -i2 / 2 / dh), "rope.hint.exp_i"),
    (_rope(exponent=lambda i2, dh: -2 * i2 / dh), "rope.hint.exp_4i"),
    (_rope(positions_of=lambda x, p: torch.arange(x.shape[-2])), "rope.hint.positions_ignored"),
    (_rope(positions_of=lambda x, p: p + 1), "rope.hint.start1"),
    (_rope(degrees=True), "rope.hint.degrees"),
    (_rope(first_only=True), "rope.hint.one_half"),
    (_rope(swap=True), "rope.hint.swapped"),
    (_rope(along_heads=True), "rope.hint.head_axis"),
    (_rope(base_used=10000.0), "rope.hint.base_fixed"),
    (rope_cos_width_half, "rope.err.broadcast"),
]
ROPE_IDS = ["interleaved", "direction", "not-inverted", "exp-i", "exp-4i", "positions-ignored",
            "start1", "degrees", "one-half", "swapped", "head-axis", "base-fixed",
            "cos-width-half"]


@pytest.mark.parametrize("fn", ROPE_RIGHT, ids=lambda f: f.__name__)
def test_rope_accepts_right_answers(fn, capsys):
    assert_passes(check_rope, fn, capsys)


@pytest.mark.parametrize("fn, hint", ROPE_MISTAKES, ids=ROPE_IDS)
def test_rope_names_each_mistake(fn, hint, capsys):
    assert_hint(check_rope, fn, ENGLISH[hint], capsys)


def test_rope_reference_is_a_rotation_of_each_pair_of_halves():
    """The reference against a rotation matrix built pair by pair, in float64."""
    from minitransformer.exercises.rope import _cases, _reference
    for case in _cases():
        x, positions = case.args
        base = case.kwargs.get("base", 10000.0)
        dh = x.shape[-1]
        expected = torch.empty_like(x, dtype=torch.float64)
        for row, pos in enumerate(positions.tolist()):
            for i in range(dh // 2):
                a = pos * base ** (-2 * i / dh)
                rot = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]],
                                   dtype=torch.float64)
                pair = x[..., row, [i, i + dh // 2]].double()  # (B, H, 2)
                expected[..., row, [i, i + dh // 2]] = pair @ rot.T
        torch.testing.assert_close(_reference(x, positions, base).double(), expected,
                                   atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- grouped key/value heads
def expand_ok(kv, num_heads):
    return kv.repeat_interleave(num_heads // kv.shape[1], dim=1)


def expand_view(kv, num_heads):
    b, hkv, n, dh = kv.shape
    g = num_heads // hkv
    return kv[:, :, None].expand(b, hkv, g, n, dh).reshape(b, num_heads, n, dh)


def expand_index(kv, num_heads):
    g = num_heads // kv.shape[1]
    return kv[:, torch.arange(num_heads) // g]


def expand_loop(kv, num_heads):
    g = num_heads // kv.shape[1]
    return torch.stack([kv[:, h // g] for h in range(num_heads)], dim=1)


EXPAND_RIGHT = [expand_ok, expand_view, expand_index, expand_loop]


def expand_tiled(kv, num_heads):
    return kv.repeat(1, num_heads // kv.shape[1], 1, 1)


def expand_cat(kv, num_heads):
    return torch.cat([kv] * (num_heads // kv.shape[1]), dim=1)


def expand_new_axis_first(kv, num_heads):
    b, hkv, n, dh = kv.shape
    return kv[:, None].expand(b, num_heads // hkv, hkv, n, dh).reshape(b, num_heads, n, dh)


def expand_new_axis_after_length(kv, num_heads):
    b, hkv, n, dh = kv.shape
    g = num_heads // hkv
    return kv.unsqueeze(3).expand(b, hkv, n, g, dh).reshape(b, num_heads, n, dh)


def expand_along_length(kv, num_heads):
    return kv.repeat_interleave(num_heads // kv.shape[1], dim=2)


def expand_along_batch(kv, num_heads):
    return torch.repeat_interleave(kv, num_heads // kv.shape[1], dim=0)


def expand_along_features(kv, num_heads):
    return kv.repeat_interleave(num_heads // kv.shape[1], dim=-1)


def expand_by_num_heads(kv, num_heads):
    return kv.repeat_interleave(num_heads, dim=1)


def expand_by_kv_heads(kv, num_heads):
    return kv.repeat_interleave(kv.shape[1], dim=1)


def expand_index_by_kv_heads(kv, num_heads):
    return kv.index_select(1, torch.arange(num_heads) // kv.shape[1])


def expand_averaged(kv, num_heads):
    return kv.mean(1, keepdim=True).repeat(1, num_heads, 1, 1)


def expand_first_head(kv, num_heads):
    return kv[:, 0:1].expand(-1, num_heads, -1, -1)


def expand_float_group(kv, num_heads):
    return kv.repeat_interleave(num_heads / kv.shape[1], dim=1)


EXPAND_MISTAKES = [
    (expand_tiled, "gqa.hint.tiled"),
    (expand_cat, "gqa.hint.tiled"),
    (expand_new_axis_first, "gqa.hint.tiled"),
    (expand_new_axis_after_length, "gqa.hint.reshape_mixed"),
    (expand_along_length, "gqa.hint.axis"),
    (expand_along_batch, "gqa.hint.axis"),
    (expand_along_features, "gqa.hint.axis"),
    (expand_by_num_heads, "gqa.hint.times_heads"),
    (expand_by_kv_heads, "gqa.hint.times_kv_heads"),
    (expand_index_by_kv_heads, "gqa.hint.divide_by_kv_heads"),
    (expand_averaged, "gqa.hint.averaged"),
    (expand_first_head, "gqa.hint.first_only"),
    (expand_float_group, "gqa.err.float_group"),
]


@pytest.mark.parametrize("fn", EXPAND_RIGHT, ids=lambda f: f.__name__)
def test_expand_kv_heads_accepts_right_answers(fn, capsys):
    assert_passes(check_expand_kv_heads, fn, capsys)


@pytest.mark.parametrize("fn, hint", EXPAND_MISTAKES,
                         ids=[f.__name__ for f, _ in EXPAND_MISTAKES])
def test_expand_kv_heads_names_each_mistake(fn, hint, capsys):
    assert_hint(check_expand_kv_heads, fn, ENGLISH[hint], capsys)


def test_expand_kv_heads_reference_groups_heads_as_enable_gqa_does():
    """Attention over the reference's expanded keys and values equals PyTorch's
    grouped-query attention on the unexpanded ones, for every case."""
    from minitransformer.exercises.gqa import _cases, _reference
    g = torch.Generator().manual_seed(0)
    for case in _cases():
        kv, num_heads = case.args
        b, hkv, n, dh = kv.shape
        k = kv
        v = torch.randn(b, hkv, n, dh, generator=g, dtype=kv.dtype)
        q = torch.randn(b, num_heads, 3, dh, generator=g, dtype=kv.dtype)
        grouped = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        expanded = F.scaled_dot_product_attention(q, _reference(k, num_heads),
                                                  _reference(v, num_heads))
        torch.testing.assert_close(expanded, grouped)


# ---------------------------------------------------------------- online softmax merge
def merge_ok(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e1, e2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, e1 * l1 + e2 * l2, e1 * o1 + e2 * o2


def merge_flash_style(m1, l1, o1, m2, l2, o2):
    """As flash_attention's loop: block 2 is the new block, (m1, l1, o1) the running sums."""
    new_m = torch.maximum(m1, m2)
    shift = new_m.masked_fill(torch.isneginf(new_m), 0.0)
    rescale = torch.exp(m1 - shift)
    bring = torch.exp(m2 - shift)
    return new_m, l1 * rescale + l2 * bring, o1 * rescale + o2 * bring


def merge_logsumexp(m1, l1, o1, m2, l2, o2):
    """Through log-sums: log l_i + m_i, with the new max taken where finite."""
    m = torch.maximum(m1, m2)
    finite = torch.isfinite(m)
    w1 = torch.where(finite, torch.exp(torch.where(finite, m1 - m, 0.0)), 0.0)
    w2 = torch.where(finite, torch.exp(torch.where(finite, m2 - m, 0.0)), 0.0)
    w1 = torch.where(torch.isneginf(m1), 0.0, w1)
    w2 = torch.where(torch.isneginf(m2), 0.0, w2)
    return m, w1 * l1 + w2 * l2, w1 * o1 + w2 * o2


MERGE_RIGHT = [merge_ok, merge_flash_style, merge_logsumexp]


def _merge(factor=lambda mi, m: torch.exp(mi - m), scale_l=(True, True), scale_o=(True, True),
           new_max=torch.maximum, guard=True):
    """A reader's merge, with one choice made wrongly."""
    def fn(m1, l1, o1, m2, l2, o2):
        m = new_max(m1, m2)
        ref = torch.where(torch.isinf(m), torch.zeros_like(m), m) if guard else m
        e1, e2 = factor(m1, ref), factor(m2, ref)
        l = (e1 if scale_l[0] else 1) * l1 + (e2 if scale_l[1] else 1) * l2  # noqa: E741
        o = (e1 if scale_o[0] else 1) * o1 + (e2 if scale_o[1] else 1) * o2
        return m, l, o
    return fn


def merge_order(m1, l1, o1, m2, l2, o2):
    m, l, o = merge_ok(m1, l1, o1, m2, l2, o2)  # noqa: E741
    return m, o, l


def merge_crossed(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e1, e2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, e2 * l1 + e1 * l2, e2 * o1 + e1 * o2


def merge_normalised(m1, l1, o1, m2, l2, o2):
    m, l, o = merge_ok(m1, l1, o1, m2, l2, o2)  # noqa: E741
    return m, l, o / l.clamp(min=1e-30)


def merge_weighted_by_l(m1, l1, o1, m2, l2, o2):
    m, l, _ = merge_ok(m1, l1, o1, m2, l2, o2)  # noqa: E741
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e1, e2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, l, e1 * l1 * o1 + e2 * l2 * o2


def merge_averaged(m1, l1, o1, m2, l2, o2):
    return torch.maximum(m1, m2), (l1 + l2) / 2, (o1 + o2) / 2


def merge_python_max(m1, l1, o1, m2, l2, o2):
    m = max(m1, m2)
    return m, torch.exp(m1 - m) * l1 + torch.exp(m2 - m) * l2, \
        torch.exp(m1 - m) * o1 + torch.exp(m2 - m) * o2


MERGE_MISTAKES = [
    (merge_order, "online.hint.order"),
    (_merge(scale_l=(False, False), scale_o=(False, False)), "online.hint.no_rescale"),
    (_merge(scale_o=(False, False)), "online.hint.o_not_rescaled"),
    (_merge(scale_l=(False, False)), "online.hint.l_not_rescaled"),
    (_merge(scale_l=(True, False), scale_o=(True, False)), "online.hint.one_block"),
    (_merge(scale_l=(False, True), scale_o=(False, True)), "online.hint.one_block"),
    (_merge(factor=lambda mi, m: torch.exp(m - mi)), "online.hint.flipped"),
    (_merge(factor=lambda mi, m: mi - m), "online.hint.no_exp"),
    (merge_crossed, "online.hint.crossed"),
    (_merge(new_max=torch.add), "online.hint.summed_max"),
    (_merge(new_max=torch.minimum), "online.hint.min"),
    (merge_normalised, "online.hint.normalised"),
    (merge_weighted_by_l, "online.hint.weighted_by_l"),
    (merge_averaged, "online.hint.averaged"),
    (_merge(guard=False), "online.hint.nan"),
    (merge_python_max, "online.err.python_max"),
]
MERGE_IDS = ["order", "no-rescale", "o-not-rescaled", "l-not-rescaled", "first-only",
             "second-only", "flipped", "no-exp", "crossed", "summed-max", "min", "normalised",
             "weighted-by-l", "averaged", "nan", "python-max"]


@pytest.mark.parametrize("fn", MERGE_RIGHT, ids=lambda f: f.__name__)
def test_online_softmax_merge_accepts_right_answers(fn, capsys):
    assert_passes(check_online_softmax_merge, fn, capsys)


@pytest.mark.parametrize("fn, hint", MERGE_MISTAKES, ids=MERGE_IDS)
def test_online_softmax_merge_names_each_mistake(fn, hint, capsys):
    assert_hint(check_online_softmax_merge, fn, ENGLISH[hint], capsys)


def test_online_softmax_reference_is_the_softmax_over_both_blocks():
    """For every case, the reference's o / l is torch.softmax over the full row
    of scores times the values (0 where every key is masked), and the six
    inputs are the two blocks' own summaries."""
    from minitransformer.exercises.online_softmax import _cases, _reference_for, summarise
    made = _cases()
    reference = _reference_for(made)
    for case, (scores, values) in made:
        m, l, o = reference(*case.args)  # noqa: E741
        dead = torch.isneginf(scores).all(dim=-1, keepdim=True)
        probs = torch.softmax(scores, dim=-1).masked_fill(dead, 0.0)
        expected = (probs.unsqueeze(-2) @ values).squeeze(-2)  # each row its own values
        torch.testing.assert_close(o / l.masked_fill(l == 0, 1.0), expected)
        torch.testing.assert_close(m, scores.amax(dim=-1, keepdim=True))
        assert not any(torch.isnan(t).any() for t in (m, l, o))
    case, (scores, values) = made[0]
    n = scores.shape[-1]
    for split in range(1, n):  # any cut of the row: the merge of its parts is the whole
        parts = (*summarise(scores[..., :split], values[..., :split, :]),
                 *summarise(scores[..., split:], values[..., split:, :]))
        for got, want in zip(merge_ok(*parts), summarise(scores, values)):
            torch.testing.assert_close(got, want)
