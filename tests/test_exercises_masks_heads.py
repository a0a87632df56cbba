"""Catalogues of readers' answers for the mask and head-reshaping checkers:
the causal mask, the padding mask, splitting into heads and merging them.

Each wrong answer is written the way a struggling reader would write it; the
test asserts that it is rejected and that the hint names its mistake. Each
unusual right answer must pass.
"""

from __future__ import annotations

import pytest
import torch
from exercise_helpers import assert_hint, assert_passes

from minitransformer import MultiHeadAttention
from minitransformer.exercises import (
    check_causal_mask,
    check_merge_heads,
    check_padding_mask,
    check_split_heads,
)
from minitransformer.exercises.heads import merge_heads_reference, split_heads_reference

# ---------------------------------------------------------------- causal mask
CAUSAL_RIGHT = [lambda n: torch.tril(torch.ones(n, n)).bool(),
                lambda n: torch.arange(n)[None, :] <= torch.arange(n)[:, None],
                lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1),
                lambda n: torch.ones(n, n).tril() == 1]


@pytest.mark.parametrize("fn", CAUSAL_RIGHT)
def test_causal_mask_accepts_right_answers(fn, capsys):
    assert_passes(check_causal_mask, fn, capsys)


CAUSAL_MISTAKES = [
    (lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1), "inverted"),
    (lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1),
     "the diagonal is False"),
    (lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=1),
     "lets each position see the next one"),
    (lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)), "you kept the upper triangle"),
    (lambda n: torch.triu(torch.full((n, n), float("-inf")), diagonal=1), "additive"),
    (lambda n: torch.triu(torch.full((n, n), -1e9), diagonal=1), "additive"),
    (lambda n: torch.tril(torch.ones(n, n)), "you returned numbers (0 and 1)"),
    (lambda n: torch.tril(torch.ones(n, n, dtype=torch.long)), "you returned numbers (0 and 1)"),
    (lambda n: torch.ones(n, n, dtype=torch.bool), "your mask blocks nothing"),
    (lambda n: torch.tril(torch.ones(1, n, n, dtype=torch.bool)), "you added a batch axis"),
    (lambda n: torch.tril(torch.ones(n, n)).bool().numpy(), "expected a torch.Tensor"),
    (lambda n: [[j <= i for j in range(n)] for i in range(n)], "expected a torch.Tensor"),
]


@pytest.mark.parametrize("fn, fragment", CAUSAL_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(CAUSAL_MISTAKES)])
def test_causal_mask_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_causal_mask, fn, fragment, capsys)


# ---------------------------------------------------------------- padding mask
PADDING_RIGHT = [lambda t, p: (t != p).unsqueeze(1).unsqueeze(2),
                 lambda t, p: t.ne(p).view(t.shape[0], 1, 1, t.shape[1]),
                 lambda t, p: (t != p)[:, None, None],
                 lambda t, p: ~(t == p).reshape(len(t), 1, 1, -1)]


@pytest.mark.parametrize("fn", PADDING_RIGHT)
def test_padding_mask_accepts_right_answers(fn, capsys):
    assert_passes(check_padding_mask, fn, capsys)


PADDING_MISTAKES = [
    (lambda t, p: (t == p)[:, None, None, :], "the mask is inverted"),
    (lambda t, p: t != p, "give it two singleton axes"),
    (lambda t, p: (t != p).unsqueeze(1), "one more singleton axis"),
    (lambda t, p: (t != p)[:, None, :, None], "the length axis is in the wrong place"),
    (lambda t, p: (t != p)[:, :, None, None], "the length axis is in the wrong place"),
    (lambda t, p: (t != p)[:, None, :, None] & (t != p)[:, None, None, :],
     "you also masked the padding *queries*"),
    (lambda t, p: (t != 0)[:, None, None, :], "instead of the pad_id argument"),
    (lambda t, p: (t > 0)[:, None, None, :], "instead of the pad_id argument"),
    (lambda t, p: (t > p)[:, None, None, :], "ids below it are real tokens too"),
    (lambda t, p: (t != p).float()[:, None, None, :], "you returned numbers"),
    (lambda t, p: t == p, "key_padding_mask"),
]


@pytest.mark.parametrize("fn, fragment", PADDING_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(PADDING_MISTAKES)])
def test_padding_mask_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_padding_mask, fn, fragment, capsys)


# ---------------------------------------------------------------- split heads
def split_ok(x, num_heads):
    b, n, d = x.shape
    return x.view(b, n, num_heads, d // num_heads).transpose(1, 2)


def test_split_reference_matches_multi_head_attention():
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    assert torch.equal(split_heads_reference(x, 3), mha._split(x))
    assert torch.equal(merge_heads_reference(mha._split(x)), x)


SPLIT_RIGHT = [split_ok,
               lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
               lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3),
               lambda x, h: x.reshape(*x.shape[:2], h, -1).swapaxes(1, 2).contiguous()]


@pytest.mark.parametrize("fn", SPLIT_RIGHT)
def test_split_heads_accepts_right_answers(fn, capsys):
    assert_passes(check_split_heads, fn, capsys)


def split_float_width(x, num_heads):
    b, n, d = x.shape
    return x.view(b, n, num_heads, d / num_heads).transpose(1, 2)


def split_reversed(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1)[::-1], dim=1)


SPLIT_MISTAKES = [
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "you returned (B, L, H, Dh)"),
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "which mixes positions between heads"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2),
     "each head got every H-th feature"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).transpose(1, 2),
     "you made Dh heads of width H"),
    (split_reversed, "your heads come in reverse order"),
    (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(0, 2, 3, 1),
     "you returned (B, H, Dh, L)"),
    (lambda x, h: torch.stack(torch.split(x, h, dim=-1), dim=1),
     "torch.split takes the size of each piece"),  # = Dh heads of width H
    (split_float_width, "use integer division, D // H"),
]


@pytest.mark.parametrize("fn, fragment", SPLIT_MISTAKES, ids=[f for _, f in SPLIT_MISTAKES])
def test_split_heads_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_split_heads, fn, fragment, capsys)


# ---------------------------------------------------------------- merge heads
def merge_ok(x):
    b, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(b, n, h * dh)


MERGE_RIGHT = [merge_ok,
               lambda x: torch.cat(x.unbind(dim=1), dim=-1),
               lambda x: x.transpose(1, 2).flatten(2),
               lambda x: x.permute(0, 2, 1, 3).contiguous().view(x.shape[0], x.shape[2], -1)]


@pytest.mark.parametrize("fn", MERGE_RIGHT)
def test_merge_heads_accepts_right_answers(fn, capsys):
    assert_passes(check_merge_heads, fn, capsys)


MERGE_MISTAKES = [
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "which mixes positions"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
     "you interleaved the heads' features"),
    (lambda x: torch.cat(x.unbind(dim=1)[::-1], dim=-1), "your heads come in reverse order"),
    (lambda x: x.transpose(1, 2), "finish with .reshape(B, L, H * Dh)"),
    (lambda x: torch.cat(x.unbind(dim=1), dim=1), "along the length"),
    (lambda x: x.sum(dim=1), "you added or averaged the heads"),
    (lambda x: x.mean(dim=1), "you added or averaged the heads"),
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "not contiguous"),
]


@pytest.mark.parametrize("fn, fragment", MERGE_MISTAKES,
                         ids=[f"{i}-{f}" for i, (_, f) in enumerate(MERGE_MISTAKES)])
def test_merge_heads_names_each_mistake(fn, fragment, capsys):
    assert_hint(check_merge_heads, fn, fragment, capsys)
