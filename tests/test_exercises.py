"""The machinery of minitransformer.exercises: how exceptions, stubs,
in-place edits and randomness are reported, that checking leaves the
notebook's state alone, that every listed mistake earns its own hint, the
size of each checker's catalogue of readers' answers, and the message
catalogues (every id exists, every language has the same format fields).

The catalogues themselves (readers' answers, right and wrong) are in
test_exercises_{attention,masks_heads,layers,training}.py.
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
import types
from pathlib import Path

import pytest
import test_exercises_attention as attention_answers
import test_exercises_layers as layer_answers
import test_exercises_lm as lm_answers
import test_exercises_masks_heads as mask_answers
import test_exercises_modern as modern_answers
import test_exercises_training as training_answers
import torch
from exercise_helpers import assert_hint, flat, run_checker

import minitransformer.exercises as ex
from minitransformer.exercises import _messages, locales
from minitransformer.exercises.locales.en import MESSAGES as ENGLISH

CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]


# ---------------------------------------------------------------- the catalogues' size
CATALOGUES = {
    "check_scaled_dot_product_attention": (attention_answers.SDPA_MISTAKES,
                                           attention_answers.SDPA_RIGHT),
    "check_masked_softmax": (attention_answers.MS_MISTAKES, attention_answers.MS_RIGHT),
    "check_multi_head_attention": (attention_answers.MHA_MISTAKES, attention_answers.MHA_RIGHT),
    "check_kv_cache_step": (attention_answers.KV_MISTAKES, attention_answers.KV_RIGHT),
    "check_causal_mask": (mask_answers.CAUSAL_MISTAKES, mask_answers.CAUSAL_RIGHT),
    "check_padding_mask": (mask_answers.PADDING_MISTAKES, mask_answers.PADDING_RIGHT),
    "check_split_heads": (mask_answers.SPLIT_MISTAKES, mask_answers.SPLIT_RIGHT),
    "check_merge_heads": (mask_answers.MERGE_MISTAKES, mask_answers.MERGE_RIGHT),
    "check_layer_norm": (layer_answers.LN_MISTAKES, layer_answers.LN_RIGHT),
    "check_feed_forward": (layer_answers.FFN_MISTAKES, layer_answers.FFN_RIGHT),
    "check_sinusoidal_encoding": (layer_answers.PE_MISTAKES, layer_answers.PE_RIGHT),
    "check_label_smoothing_loss": (training_answers.LS_MISTAKES, training_answers.LS_RIGHT),
    "check_warmup_schedule": (training_answers.WARMUP_MISTAKES, training_answers.WARMUP_RIGHT),
    "check_greedy_step": (training_answers.GREEDY_MISTAKES, training_answers.GREEDY_RIGHT),
    "check_top_p_filter": (lm_answers.TOP_P_MISTAKES, lm_answers.TOP_P_RIGHT),
    "check_next_token_loss": (lm_answers.LOSS_MISTAKES, lm_answers.LOSS_RIGHT),
    "check_bert_masking": (lm_answers.BERT_MISTAKES, lm_answers.BERT_RIGHT),
    "check_rms_norm": (modern_answers.RMS_MISTAKES, modern_answers.RMS_RIGHT),
    "check_rope": (modern_answers.ROPE_MISTAKES, modern_answers.ROPE_RIGHT),
    "check_expand_kv_heads": (modern_answers.EXPAND_MISTAKES, modern_answers.EXPAND_RIGHT),
    "check_online_softmax_merge": (modern_answers.MERGE_MISTAKES, modern_answers.MERGE_RIGHT),
}


def test_every_checker_has_a_catalogue_of_answers():
    """At least 8 realistic mistakes (each tested for its hint) and 2 unusual
    right answers (each tested to pass) per checker."""
    assert set(CATALOGUES) == {c.__name__ for c in CHECKERS}
    for name, (mistakes, right) in CATALOGUES.items():
        assert len(mistakes) >= 8, f"{name}: {len(mistakes)} mistakes"
        assert len(right) >= 3, f"{name}: {len(right)} right answers (the plain one + 2)"


# ---------------------------------------------------------------- every listed mistake
def _mistake_lists():
    from minitransformer.exercises import (
        attention,
        bert_masking,
        decoding,
        feedforward,
        gqa,
        heads,
        kv_cache,
        layernorm,
        lm_loss,
        loss,
        masks,
        multihead,
        online_softmax,
        positional,
        rmsnorm,
        rope,
        sampling,
        schedule,
    )
    return [
        ("sdpa", ex.check_scaled_dot_product_attention, attention._sdpa_mistakes()),
        ("masked_softmax", ex.check_masked_softmax, attention._ms_mistakes()),
        ("causal", ex.check_causal_mask, masks._causal_mistakes()),
        ("padding", ex.check_padding_mask, masks._padding_mistakes()),
        ("split", ex.check_split_heads, heads._split_mistakes()),
        ("merge", ex.check_merge_heads, heads._merge_mistakes()),
        ("multi_head", ex.check_multi_head_attention, multihead._mistakes()),
        ("kv_cache", ex.check_kv_cache_step, kv_cache._mistakes()),
        ("layer_norm", ex.check_layer_norm, layernorm._mistakes()),
        ("feed_forward", ex.check_feed_forward, feedforward._mistakes()),
        ("sinusoidal", ex.check_sinusoidal_encoding, positional._mistakes()),
        ("label_smoothing", ex.check_label_smoothing_loss, loss._mistakes()),
        ("warmup", ex.check_warmup_schedule, schedule._mistakes()),
        ("greedy", ex.check_greedy_step, decoding._mistakes()),
        ("top_p", ex.check_top_p_filter, sampling._mistakes()),
        ("next_token_loss", ex.check_next_token_loss, lm_loss._mistakes()),
        ("bert_masking", ex.check_bert_masking, bert_masking._mistakes()),
        ("rms_norm", ex.check_rms_norm, rmsnorm._mistakes()),
        ("rope", ex.check_rope, rope._mistakes()),
        ("expand_kv_heads", ex.check_expand_kv_heads, gqa._mistakes()),
        ("online_softmax_merge", ex.check_online_softmax_merge, online_softmax._mistakes()),
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name, checker, mistakes", [
    pytest.param(*m, marks=[pytest.mark.slow] if m[0] == "greedy" else [])
    for m in _mistake_lists()], ids=[m[0] for m in _mistake_lists()])
def test_each_listed_mistake_earns_its_own_hint(name, checker, mistakes, capsys):
    """Fed the wrong answer a mistake describes, the checker fails and prints
    that mistake's hint: no hint is shadowed by another."""
    assert {c.__name__ for _, c, _ in _mistake_lists()} == {c.__name__ for c in CHECKERS}
    for mistake in mistakes:
        ok, out = run_checker(checker, mistake.compute, capsys)
        assert not ok, f"{name}: a listed mistake passed:\n{out}"
        assert flat(_messages.t(mistake.hint)) in flat(out), (
            f"{name}: expected the hint {mistake.hint!r}, got:\n{out}")


# ---------------------------------------------------------------- exceptions and stubs
def sdpa_ok(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_a_stub_is_not_implemented_yet(checker, capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError
    assert_hint(checker, stub, "Not implemented yet", capsys)


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_a_function_without_parameters_is_told_the_signature(checker, capsys):
    def no_parameters():
        return None
    ok, out = run_checker(checker, no_parameters, capsys)
    assert not ok and "cannot be called as fn(" in out


def test_exceptions_quote_the_readers_line(capsys):
    def broken(q, k, v, mask=None):
        torch.zeros(1)
        raise RuntimeError("boom")  # the reader's own line

    ok, out = run_checker(ex.check_scaled_dot_product_attention, broken, capsys)
    assert not ok
    assert 'your line \'raise RuntimeError("boom") # the reader\'s own line\' raised ' \
           "RuntimeError: boom" in flat(out)


def test_signature_hint_only_when_the_call_cannot_bind(capsys):
    """A mask parameter missing: the signature. A TypeError inside the
    reader's code: that line, never the signature."""
    def no_mask_arg(q, k, v):
        return sdpa_ok(q, k, v)

    def inner_type_error(q, k, v, mask=None):
        return torch.softmax(q @ k.transpose(-2, -1))  # no dim

    assert_hint(ex.check_scaled_dot_product_attention, no_mask_arg,
                "cannot be called as fn(q, k, v, mask=None)", capsys)
    ok, out = run_checker(ex.check_scaled_dot_product_attention, inner_type_error, capsys)
    assert not ok and "cannot be called as" not in out
    assert "torch.softmax(q @ k.transpose(-2, -1))" in out and "pass dim=-1" in out


@pytest.mark.parametrize("checker, fn, fragment", [
    (ex.check_split_heads, mask_answers.split_float_width, "D // H"),
    (ex.check_layer_norm, layer_answers.ln_ddof, "no ddof"),
    (ex.check_feed_forward, layer_answers.FFN_MISTAKES[10][0], "torch.relu(h)"),
    (ex.check_label_smoothing_loss, training_answers.ls_smoothing_keyword, "label_smoothing="),
    (ex.check_greedy_step, training_answers.greedy_wrong_keyword, "src_mask"),
    (ex.check_scaled_dot_product_attention, attention_answers.sdpa_softmax_no_dim, "dim=-1"),
], ids=["view-float", "var-ddof", "max-0", "smoothing-keyword", "decode-keyword",
        "softmax-no-dim"])
def test_type_errors_inside_the_function_are_not_blamed_on_its_signature(
        checker, fn, fragment, capsys):
    """The issue's six examples: each gets a hint about the call that failed."""
    ok, out = run_checker(checker, fn, capsys)
    assert not ok and "cannot be called as" not in out and "your line '" in out
    assert fragment in flat(out)


def test_not_a_function_and_no_return(capsys):
    def no_return(q, k, v, mask=None):
        sdpa_ok(q, k, v, mask)

    assert_hint(ex.check_scaled_dot_product_attention, 42, "expected a function", capsys)
    assert_hint(ex.check_scaled_dot_product_attention, no_return, "is a 'return' missing?",
                capsys)


# ---------------------------------------------------------------- checking leaves state alone
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_checking_leaves_the_global_seed_and_threads_alone(capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    for _, checker, mistakes in _mistake_lists():
        checker(mistakes[0].compute)
    capsys.readouterr()
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


# ---------------------------------------------------------------- languages
def _used_ids() -> set[str]:
    """Every string constant in the checkers' source that looks like a message id
    of a known area (the first part of an English id)."""
    areas = {key.split(".")[0] for key in ENGLISH}
    folder = Path(ex.__file__).parent
    found = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = node.value.split(".")
                if len(parts) >= 2 and parts[0] in areas and " " not in node.value:
                    found.add(node.value)
    return found


def test_every_message_id_used_exists_and_every_english_id_is_used():
    used = _used_ids()
    assert used - set(ENGLISH) == set(), "ids used but missing from locales/en.py"
    assert set(ENGLISH) - used == set(), "ids in locales/en.py that no checker uses"


def test_the_chinese_translates_the_current_english():
    """``i18n/zh/exercise_messages.json`` records the English each Chinese message
    translates (``tools/record_exercise_messages.py``): an English text changed under the same
    id fails here until its Chinese is revised and the record rewritten."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import record_exercise_messages as record

    then = record.recorded()
    stale = [f"{k}:\n  was: {then.get(k, '(new)')}\n  now: {ENGLISH[k]}" for k in record.changed()]
    assert not stale, ("revise these messages in locales/zh.py, then run "
                       "`python tools/record_exercise_messages.py`:\n" + "\n".join(stale))


#: Languages that must translate every message (others may fall back to English).
COMPLETE_LANGUAGES = ["en", "zh"]
#: Messages made of code, shapes and names only, the same in every language.
CODE_ONLY = {"name.y", "merge.case.plain", "ls.case.float64"}


@pytest.mark.parametrize("lang", _messages.available_languages())
def test_every_language_has_the_english_ids_and_format_fields(lang):
    messages = _messages.catalogue(lang)
    assert set(messages) <= set(ENGLISH), f"{lang}: ids that English lacks"
    if lang in COMPLETE_LANGUAGES:
        missing = sorted(set(ENGLISH) - set(messages))
        assert not missing, f"{lang}: no translation of {missing}"
        untranslated = sorted(k for k in messages if lang != "en" and messages[k] == ENGLISH[k]
                              and k not in CODE_ONLY)
        assert not untranslated, f"{lang}: English text copied as is: {untranslated}"
    for key, text in messages.items():
        assert _messages.format_fields(text) == _messages.format_fields(ENGLISH[key]), (
            f"{lang}: {key} has fields {_messages.format_fields(text)}, English "
            f"{_messages.format_fields(ENGLISH[key])}")
        text.format(**{f: "x" for f in _messages.format_fields(text)})  # well formed


def test_english_is_available_and_the_default():
    assert "en" in _messages.available_languages()
    assert _messages.DEFAULT_LANGUAGE == "en"


@pytest.fixture
def fake_language(monkeypatch):
    """A language "xx" that translates two messages and lacks the rest."""
    module = types.ModuleType(f"{locales.__name__}.xx")
    module.MESSAGES = {"harness.passed": "alles gut ({count})",
                       "sdpa.hint.no_scale": "XX skaliere die Werte"}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(locales, "xx", module, raising=False)
    known = _messages.available_languages()
    monkeypatch.setattr(_messages, "available_languages", lambda: sorted([*known, "xx"]))
    _messages.catalogue.cache_clear()
    yield module
    _messages.catalogue.cache_clear()


def test_lang_argument_translates_and_falls_back_to_english(fake_language, capsys):
    ok, out = run_checker(ex.check_scaled_dot_product_attention, sdpa_ok, capsys, lang="xx")
    assert ok and "alles gut (8)" in out and "Tested:" in out  # "Tested:" from English
    no_scale = attention_answers.SDPA_MISTAKES[0][0]
    ok, out = run_checker(ex.check_scaled_dot_product_attention, no_scale, capsys, lang="XX")
    assert not ok and "XX skaliere die Werte" in out and "(failed on: q (2, 5, 8)" in out
    assert ex.get_language() == "en"  # lang= is for that call only


def test_set_language(fake_language, capsys):
    try:
        ex.set_language("xx-CH")  # a regional code falls back to its language
        assert ex.get_language() == "xx"
        ok, out = run_checker(ex.check_scaled_dot_product_attention, sdpa_ok, capsys)
        assert ok and "alles gut" in out
    finally:
        ex.set_language("en")
    ok, out = run_checker(ex.check_scaled_dot_product_attention, sdpa_ok, capsys)
    assert "correct on all 8 tests" in out


def test_unknown_language_is_a_clear_error():
    with pytest.raises(ValueError, match="no exercise messages in language 'klingon'"):
        ex.set_language("klingon")
    with pytest.raises(ValueError, match="available: en"):
        ex.check_causal_mask(lambda n: None, lang="klingon")
    assert ex.get_language() == "en"


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_every_checker_takes_lang(checker):
    parameter = inspect.signature(checker).parameters["lang"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None


def test_the_package_docstring_lists_every_checker():
    for checker in CHECKERS:
        assert f"``{checker.__name__}``" in ex.__doc__
