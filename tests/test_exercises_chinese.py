"""The checked exercises in Chinese (issue 16).

For every checker, a reader's mistake from its catalogue gets its hint in
Chinese (``lang="zh"``) and a right answer gets the pass verdict in Chinese
(``set_language("zh")``), with no English left in either. Chinese verdicts are
wrapped by width, between characters
(:mod:`minitransformer.exercises._text`); text without wide characters is
wrapped exactly as :func:`textwrap.fill` wraps it.
"""

from __future__ import annotations

import random
import re
import textwrap

import pytest
from exercise_helpers import flat, run_checker
from test_exercises import CATALOGUES

import minitransformer.exercises as ex
from minitransformer.exercises._text import (
    NO_LINE_END,
    NO_LINE_START,
    VERDICT_WIDTH,
    text_width,
    wrap,
)
from minitransformer.exercises.locales.en import MESSAGES as ENGLISH
from minitransformer.exercises.locales.zh import MESSAGES as CHINESE

#: checker: (index of a mistake in its catalogue, a piece of the Chinese hint it must get)
ZH_HINTS = {
    "check_scaled_dot_product_attention": (0, "分数没有缩放：在 softmax 之前把 q @ kᵀ 除以 √d_k"),
    "check_masked_softmax": (0, "你把被屏蔽的分数填成了 0，但 exp(0) = 1"),
    "check_multi_head_attention": (0, "投影要写 x @ w.T，而不是 x @ w"),
    "check_kv_cache_step": (0, "请返回 (output, cache_k, cache_v)"),
    "check_causal_mask": (0, "掩码反了：True 必须表示“可以关注”，即对角线及其下方"),
    "check_padding_mask": (0, "掩码反了：True 必须表示“可以关注”，即真实词元"),
    "check_split_heads": (0, "请用 .transpose(1, 2) 把头轴移到长度轴前面"),
    "check_merge_heads": (0, "直接 reshape 成 (B, L, D)，这会把位置混在一起"),
    "check_layer_norm": (0, "你用的是无偏方差（除以 D − 1"),
    "check_feed_forward": (0, "两层之间没有 ReLU"),
    "check_sinusoidal_encoding": (0, "你把正弦放在前一半、余弦放在后一半"),
    "check_label_smoothing_loss": (0, "你没有做平滑"),
    "check_warmup_schedule": (0, "你取了两项中的最大值：应取最小值"),
    "check_greedy_step": (0, "请只返回每一行的下一个词元"),
    "check_top_p_filter": (0, "请返回概率，即这些 logits 的 softmax"),
    "check_next_token_loss": (0, "位置 t 看到的是词元 0..t，预测的是词元 t + 1"),
    "check_bert_masking": (0, "没有一个标签是 -100"),
    "check_rms_norm": (0, "你减去了均值：那是 LayerNorm"),
    "check_rope": (0, "本练习（以及本包）按两半配对"),
    "check_expand_kv_heads": (0, "每个键/值头服务 g = H / Hkv 个相邻的查询头"),
    "check_online_softmax_merge": (0, "请按 (m, l, o) 的顺序返回"),
}
CHECKERS = [getattr(ex, name) for name in sorted(ZH_HINTS)]
#: Words of the English verdicts that must not be left in a Chinese one.
ENGLISH_WORDS = re.compile(r"\b(you|your|the|correct|Tested|failed|Note)\b")


def _params():
    return [pytest.param(c, marks=[pytest.mark.slow] if c is ex.check_greedy_step else [],
                         id=c.__name__) for c in CHECKERS]


def _fits(out: str, width: int = VERDICT_WIDTH) -> None:
    for line in out.splitlines():
        assert text_width(line) <= width, f"{text_width(line)} columns: {line}"


def test_every_checker_has_a_chinese_hint_test():
    assert set(ZH_HINTS) == set(CATALOGUES) == {n for n in ex.__all__ if n.startswith("check_")}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("checker", _params())
def test_a_mistake_gets_its_hint_in_chinese(checker, capsys):
    index, fragment = ZH_HINTS[checker.__name__]
    wrong = CATALOGUES[checker.__name__][0][index][0]
    ok, out = run_checker(checker, wrong, capsys, lang="zh")
    assert not ok and out.startswith(f"✗ {checker.__name__.removeprefix('check_')}: ")
    assert flat(fragment) in flat(out), f"expected {fragment!r} in:\n{out}"
    assert "（出错的输入：" in out and not ENGLISH_WORDS.search(out), out
    _fits(out)
    assert ex.get_language() == "en"  # lang= is for that call only


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("checker", _params())
def test_a_right_answer_passes_in_chinese(checker, capsys):
    right = CATALOGUES[checker.__name__][1][0]
    try:
        ex.set_language("zh")
        ok, out = run_checker(checker, right, capsys)
    finally:
        ex.set_language("en")
    assert ok and out.startswith(f"✓ {checker.__name__.removeprefix('check_')}: ")
    assert re.search(r"全部 \d+ 个测试都正确。", out) and "已测试：" in flat(out), out
    assert not ENGLISH_WORDS.search(out), out
    _fits(out)


def test_harness_messages_in_chinese(capsys):
    def stub(length):
        raise NotImplementedError

    def mutates(tokens, pad_id):
        mask = (tokens != pad_id)[:, None, None, :]
        tokens.zero_()
        return mask

    cases = [(ex.check_causal_mask, stub, "还没有实现：把 'raise NotImplementedError' 换成"),
             (ex.check_causal_mask, lambda: None, "你的函数无法以 fn(length) 的形式调用"),
             (ex.check_padding_mask, mutates, "你的函数原地修改了某个输入张量"),
             (ex.check_causal_mask, 42, "这里需要一个函数，你传入的是一个 int。"),
             (ex.check_causal_mask, lambda n: None, "实际是空值 None（是不是少了 'return'？）")]
    for checker, fn, fragment in cases:
        ok, out = run_checker(checker, fn, capsys, lang="zh")
        assert not ok and flat(fragment) in flat(out), out
        _fits(out)


# ---------------------------------------------------------------- wrapping by width
def _unwrapped(text: str) -> str:
    """The wrapped text with its line breaks and indents taken out again."""
    lines = text.split("\n")
    return lines[0] + "".join(line.removeprefix("   ") for line in lines[1:])


@pytest.mark.parametrize("width", [12, 20, 33, 60, 88])
def test_chinese_text_is_wrapped_by_width_between_characters(width):
    for key, text in CHINESE.items():
        if " " in text:  # spaces are line breaks too: the text could not be put back together
            continue
        wrapped = wrap(text, width=width)
        assert _unwrapped(wrapped) == text, key
        lines = wrapped.split("\n")
        for i, line in enumerate(lines):
            body = line.removeprefix("   ") if i else line
            # a longer line is one piece that may not be broken, such as "{labels}。"
            assert text_width(line) <= width or wrap(body, width=1) == body, (key, line)
            assert i == 0 or body[0] not in NO_LINE_START, (key, line)
            assert i == len(lines) - 1 or body[-1] not in NO_LINE_END, (key, line)


def test_a_chinese_character_takes_two_columns():
    lines = wrap("汉" * 50, width=20).split("\n")
    assert [len(line) for line in lines[:2]] == [10, 3 + 8]  # 20 columns; 3 + 16 (+2 > 20)
    assert wrap("注：" + "a" * 30, width=10).split("\n") == ["注：", "   " + "a" * 30]


def test_mixed_text_breaks_at_spaces_and_between_chinese_characters():
    text = CHINESE["harness.not_implemented"]
    wrapped = wrap(text, width=40)
    words = re.findall(r"[\x21-\x7e]+", text)  # code and other runs of ASCII
    assert words == re.findall(r"[\x21-\x7e]+", wrapped)  # none is cut
    assert all(text_width(line) <= 40 for line in wrapped.split("\n"))
    assert flat(wrapped) == flat(text)


def test_text_without_wide_characters_is_wrapped_as_textwrap_does():
    """The English verdicts come out exactly as before the wrapper learnt Chinese."""
    def reference(text, width, first=""):
        fill = lambda line, indent: textwrap.fill(  # noqa: E731
            line.strip(), width=width, initial_indent=indent, subsequent_indent="   ",
            break_on_hyphens=False, break_long_words=False)
        lines = text.split("\n")
        return "\n".join([fill(lines[0], first)] + [fill(line, "   ") for line in lines[1:]])

    for text in ENGLISH.values():
        for width in (20, 50, 88):
            assert wrap(text, width, "✗ x: ") == reference(text, width, "✗ x: ")
    rng = random.Random(0)
    for _ in range(3000):
        words = ["".join(rng.choice("ab-x.(") for _ in range(rng.randint(0, 12)))
                 for _ in range(rng.randint(0, 15))]
        text = rng.choice([" ", "  ", "\n", " \n "]).join(words)
        width = rng.randint(4, 30)
        assert wrap(text, width) == reference(text, width), (text, width)
