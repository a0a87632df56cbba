"""The language-model commands (minitransformer.lm.cli): ``lm train`` and
``lm sample`` on the tiny fixture corpus.

The flags come from LanguageModelConfig's and TrainConfig's fields; the run
folder is refused, resumed and replaced as ``train``'s is; the tokenizer is
the one ``train`` builds; the printed perplexity is ``exp`` of the loss
evaluated independently on the validation split; greedy sampling equals an
argmax loop written here, and for a masked-LM run greedy filling-in the
argmax at each blank; a fixed seed gives the same samples; every error is
one line with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shlex
import shutil
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_one_line_error, help_entries, part_flags, run_cli

from minitransformer import LanguageModel, LanguageModelConfig, MaskedLanguageModel
from minitransformer.cli import build_parser, main, parse_args
from minitransformer.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    LMBatcher,
    build_tokenizers,
    load_multi30k,
)
from minitransformer.data.lines import one_line
from minitransformer.lm import cli as lm_cli
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.training import TrainConfig, evaluate_loss, options
from minitransformer.training.checkpoint import build_model, load_checkpoint, save_checkpoint
from minitransformer.training.options import DEFAULT_PRESET, PRESETS, SET_BY_CALLER, flag
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_LM,
    CPU_LM_TRAINING,
    ERA_PARTS,
    language_model_config,
    positions_for,
)
from minitransformer.training.runs import lock_run

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"
TINY = ["--data-root", str(FIXTURES), "--no-download", "--d-model", "16", "--heads", "2",
        "--layers", "1", "--d-ff", "32", "--vocab-size", "400", "--max-tokens", "256",
        "--warmup", "10", "--lr", "3e-3", "--amp", "off", "--quiet", "--device", "cpu"]


_cli, _one_line_error = run_cli, assert_one_line_error


def _flags(*commands: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    for command in commands:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[command]
    return {s: a for a in parser._actions for s in a.option_strings}


def _tokenizer():
    """The tokenizer ``train`` builds from the fixture's German-English pairs."""
    pairs = load_multi30k("train", "de", "en", root=FIXTURES, download=False)
    return build_tokenizers(pairs, "subword", vocab_size=400)[1]


def _train(tmp: Path, *more: str) -> list[str]:
    return ["lm", "train", "--out", str(tmp), *TINY, *more]


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("gpt")
    code = main(_train(out, "--max-steps", "6"))
    assert code == 0
    return out


@pytest.fixture
def gpt_output(gpt_run, capsys, tmp_path) -> tuple[Path, str]:
    """A fresh copy of the run, trained for 2 more steps to see what lm train prints."""
    run = tmp_path / "run"
    shutil.copytree(gpt_run, run)
    code, out, err = _cli(capsys, _train(run, "--max-steps", "8", "--resume"))
    assert code == 0, err
    return run, out


# --- the flags: the configs' fields, the presets' defaults ----------------------------------


def test_every_lm_config_and_train_field_has_its_flag():
    flags = _flags("lm", "train")
    for cls in (LanguageModelConfig, TrainConfig):
        for f in dataclasses.fields(cls):
            if f.name not in SET_BY_CALLER:
                assert flags[flag(f.name)].dest == f.name, f.name
    assert "--layers" in flags and "--post-ln" in flags and "--tie-output" in flags


def test_a_new_lm_field_gets_a_flag_and_reaches_the_config(monkeypatch):
    cls = dataclasses.make_dataclass(
        "WindowConfig", [("window", int, dataclasses.field(default=64))],
        bases=(LanguageModelConfig,))
    monkeypatch.setattr(options, "LM_CONFIG", cls)
    args = build_parser().parse_args(["lm", "train", "--out", "x", "--window", "8"])
    config = lm_cli.lm_config_from_flags(args, 100)
    assert isinstance(config, cls) and config.window == 8


def test_lm_train_defaults_are_the_presets():
    args = build_parser().parse_args(["lm", "train", "--out", "x"])
    assert args.objective == "causal" and args.lang == "en" and args.tokenizer == "subword"
    positions = positions_for(CPU_DATA["max_len"])
    assert lm_cli.lm_config_from_flags(args, 100) == CPU_LM.build(100, max_len=positions)
    assert lm_cli.lm_train_config_from_flags(args) == CPU_LM_TRAINING.build(
        epochs=None, max_minutes=10.0, checkpoint_dir="x")
    masked = build_parser().parse_args(["lm", "train", "--out", "x", "--objective", "masked"])
    assert lm_cli.lm_config_from_flags(masked, 100).vocab_size == 101  # + the mask token


@pytest.mark.parametrize("preset", PRESETS)
def test_the_preset_gives_its_language_model(preset):
    """`lm train --preset P`: CPU_LM's sizes with the parts of era P, as
    `language_model_config(..., era=P)` builds them; the training unchanged."""
    args = parse_args(["lm", "train", "--out", "x", "--preset", preset])
    positions = positions_for(CPU_DATA["max_len"])
    expected = language_model_config(100, era=preset, **CPU_LM, max_len=positions)
    assert args.preset == preset and lm_cli.lm_config_from_flags(args, 100) == expected
    assert lm_cli.lm_train_config_from_flags(args) == CPU_LM_TRAINING.build(
        epochs=None, max_minutes=10.0, checkpoint_dir="x")
    args = build_parser(preset).parse_args(["lm", "train", "--out", "x"])
    assert lm_cli.lm_config_from_flags(args, 100) == expected
    if preset == DEFAULT_PRESET:
        assert expected == CPU_LM.build(100, max_len=positions)  # what lm train gave before


def test_an_explicit_flag_overrides_the_lm_preset():
    positions = positions_for(CPU_DATA["max_len"])
    args = parse_args(["lm", "train", "--out", "x", "--preset", "2020s", "--positional",
                       "learned", "--layers", "2"])
    assert lm_cli.lm_config_from_flags(args, 100) == language_model_config(
        100, era="2020s", **{**CPU_LM, "num_layers": 2}, positional="learned",
        max_len=positions)
    args = parse_args(["lm", "train", "--out", "x", "--preset", "2020s",
                       *part_flags(ERA_PARTS["2017"])])
    assert lm_cli.lm_config_from_flags(args, 100) == language_model_config(
        100, era="2017", **CPU_LM, max_len=positions)


@pytest.mark.parametrize("preset", PRESETS)
def test_help_shows_the_lm_presets_defaults(capsys, preset):
    code, out, _ = _cli(capsys, ["lm", "train", "--preset", preset, "--help"])
    assert code == 0
    entries = help_entries(out)
    assert f"(default: {preset})" in entries["--preset"]
    config, checked = language_model_config(100, era=preset, **CPU_LM), set()
    for f, _ in options.config_fields(options.LM_CONFIG):
        if "default:" in options.HELP.get(f.name, ""):  # says its default in words
            continue
        value = getattr(config, f.name)
        shown = 0 if value is None and f.name in options.ZERO_IS_NONE else value
        assert f"(default: {shown})" in entries[flag(f.name)], (f.name, entries[flag(f.name)])
        checked.add(f.name)
    assert set(ERA_PARTS[preset]) - {"norm_first"} <= checked
    if preset == DEFAULT_PRESET:
        assert _cli(capsys, ["lm", "train", "--help"])[1] == out


def test_lm_run_json_records_the_preset_and_resume_keeps_it(capsys, tmp_path):
    code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "1", "--preset", "2020s"))
    assert code == 0, err
    assert json.loads((tmp_path / "run.json").read_text())["preset"] == "2020s"
    stored = load_checkpoint(tmp_path / "last.pt")["model_config"]
    assert {k: stored[k] for k in ERA_PARTS["2020s"]} == ERA_PARTS["2020s"]
    code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "2", "--resume"))
    _one_line_error(code, err)
    assert "--preset 2017 (run: 2020s)" in err and "--feed-forward relu (run: swiglu)" in err
    code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "2", "--resume",
                                       *part_flags(ERA_PARTS["2020s"])))
    _one_line_error(code, err)
    assert "--preset 2017 (run: 2020s)" in err and "--feed-forward" not in err
    code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "2", "--resume", "--preset",
                                       "2020s"))
    assert code == 0, err
    assert load_checkpoint(tmp_path / "last.pt")["train_state"]["step"] == 2
    assert json.loads((tmp_path / "run.json").read_text())["preset"] == "2020s"


@pytest.mark.parametrize("argv, message", [
    (["lm"], "required"),
    (["lm", "train", "--out", "x", "--preset", "1990s"], "argument --preset: invalid choice"),
    (["lm", "train"], "required: --out"),
    (["lm", "train", "--out", "x", "--objective", "next"], "invalid choice"),
    (["lm", "train", "--out", "x", "--lang", "fr"], "invalid choice"),
    (["lm", "train", "--out", "x", "--layers", "0"], "--layers: expected a positive integer"),
    (["lm", "train", "--out", "x", "--dropout", "1"], "expected a number in [0, 1)"),
    (["lm", "train", "--out", "x", "--mask-prob", "0"], "expected a number in (0, 1]"),
    (["lm", "train", "--out", "x", "--minutes", "-1"], "expected a positive number"),
    (["lm", "sample"], "required: --run"),
    (["lm", "sample", "--run", "x", "--top-p", "0"], "expected a number in (0, 1]"),
    (["lm", "sample", "--run", "x", "--top-k", "0"], "expected a positive integer"),
    (["lm", "sample", "--run", "x", "--temperature", "-1"], "expected a non-negative number"),
    (["lm", "sample", "--run", "x", "--num-samples", "0"], "expected a positive integer"),
])
def test_bad_arguments_are_one_line(capsys, argv, message):
    code, out, err = _cli(capsys, argv)
    _one_line_error(code, err)
    assert message in err and out == ""


def test_model_flags_are_checked_before_anything_is_written(capsys, tmp_path):
    code, _, err = _cli(capsys, _train(tmp_path / "o", "--heads", "3"))
    _one_line_error(code, err)
    assert "divisible" in err and not (tmp_path / "o").exists()


def test_the_readmes_lm_commands_parse():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines()
             if line.startswith("python -m minitransformer lm ")]
    assert {shlex.split(line)[4] for line in lines} == {"train", "sample"}
    for line in lines:
        build_parser().parse_args(shlex.split(line)[3:])


@pytest.mark.parametrize("command, flag_name", [("train", "--objective"),
                                                ("sample", "--top-p")])
def test_help(capsys, command, flag_name):
    code, out, _ = _cli(capsys, ["lm", command, "--help"])
    assert code == 0 and f"usage: python -m minitransformer lm {command}" in out
    assert flag_name in out


# --- lm train: the run folder ---------------------------------------------------------------


def test_the_run_holds_the_tokenizer_train_builds(gpt_run):
    ckpt = load_checkpoint(gpt_run / "best.pt")
    tokenizer = _tokenizer()
    assert tokenizer.model_proto == (gpt_run / "tokenizer.model").read_bytes()
    model = build_model(ckpt)
    assert isinstance(model, LanguageModel) and not isinstance(model, MaskedLanguageModel)
    assert model.config.vocab_size == len(tokenizer) and model.config.d_model == 16
    assert ckpt["vocabs"]["lm"] == {"lang": "en", "objective": "causal", "mask_id": None}
    assert {"last.pt", "history.json", "run.json"} <= {p.name for p in gpt_run.iterdir()}


def test_printed_perplexity_is_exp_of_the_validation_loss(gpt_output):
    run, out = gpt_output
    printed = float(re.search(r"perplexity ([\d.]+)", out).group(1))
    model = build_model(run / "last.pt")  # the weights validated last (the average)
    pairs = load_multi30k("val", "de", "en", root=FIXTURES, download=False)
    tokenizer = _tokenizer()
    valid = [ids for ids in (tokenizer.encode(en) for _, en in pairs) if ids]
    loss = evaluate_loss(model, LMBatcher(valid, 256, shuffle=False))
    assert printed == pytest.approx(math.exp(loss), abs=0.051)
    assert "stopped (max_steps) after 8 steps" in out and "resuming from" in out


def test_a_second_train_into_the_run_is_refused(gpt_run, capsys):
    before = {p.name: p.read_bytes() for p in gpt_run.iterdir() if p.is_file()}
    code, _, err = _cli(capsys, _train(gpt_run, "--max-steps", "2"))
    _one_line_error(code, err)
    assert "already holds a run" in err and "--overwrite" in err
    after = {p.name: p.read_bytes() for p in gpt_run.iterdir() if p.is_file()}
    assert after == before


def test_overwrite_replaces_the_run(gpt_run, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(gpt_run, run)
    code, _, err = _cli(capsys, _train(run, "--max-steps", "2", "--overwrite"))
    assert code == 0, err
    assert load_checkpoint(run / "last.pt")["train_state"]["step"] == 2


def test_resume_with_other_options_is_refused(gpt_run, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(gpt_run, run)
    code, _, err = _cli(capsys, _train(run, "--max-steps", "20", "--resume", "--d-model", "32",
                                       "--objective", "masked"))
    _one_line_error(code, err)
    assert "--d-model 32 (run: 16)" in err and "--objective masked (run: causal)" in err


def test_resume_of_a_translation_run_is_refused(capsys, tmp_path):
    (tmp_path / "last.pt").write_bytes(b"x")
    (tmp_path / "run.json").write_text('{"src_lang": "de", "tgt_lang": "en"}')
    code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "2", "--resume"))
    _one_line_error(code, err)
    assert "holds no lm train run" in err


def test_one_lm_train_at_a_time_in_a_folder(capsys, tmp_path):
    with lock_run(tmp_path):  # as another train holding the folder would
        code, _, err = _cli(capsys, _train(tmp_path, "--max-steps", "2"))
    _one_line_error(code, err)
    assert "in use by another train" in err and not (tmp_path / "last.pt").exists()


# --- lm sample -------------------------------------------------------------------------------


def _sample(capsys, run: Path, *more: str) -> list[str]:
    code, out, err = _cli(capsys, ["lm", "sample", "--run", str(run), "--device", "cpu", *more])
    assert code == 0, err
    return out.splitlines()


def test_a_fixed_seed_gives_the_same_samples(gpt_run, capsys):
    argv = ("--prompt", "A dog", "--seed", "7", "--num-samples", "3", "--max-new-tokens", "12")
    first = _sample(capsys, gpt_run, *argv)
    assert len(first) == 3 and all(line.startswith("A dog") for line in first)
    assert _sample(capsys, gpt_run, *argv) == first


def test_greedy_sampling_is_the_argmax_continuation(gpt_run, capsys):
    """temperature 0 = an argmax loop over the whole sequence (no cache), after BOS."""
    model, tokenizer = build_model(gpt_run / "best.pt"), _tokenizer()
    ids = [BOS_ID] + tokenizer.encode("Two men")
    with torch.no_grad():
        for _ in range(15):
            logits = model(torch.tensor([ids]))[0, -1]
            logits[model.config.pad_id] = -math.inf
            ids.append(int(logits.argmax()))
            if ids[-1] == EOS_ID:
                break
    lines = _sample(capsys, gpt_run, "--prompt", "Two men", "--temperature", "0",
                    "--max-new-tokens", "15")
    assert lines == [one_line(tokenizer.decode(ids))]  # one line a sample


def test_a_prompt_longer_than_the_positions_is_one_line(gpt_run, capsys):
    code, _, err = _cli(capsys, ["lm", "sample", "--run", str(gpt_run), "--max-new-tokens",
                                 "1000", "--device", "cpu"])
    _one_line_error(code, err)
    assert "positions" in err


def test_sample_refuses_a_translator_and_translate_an_lm(gpt_run, capsys, tmp_path):
    model = Transformer(TransformerConfig(8, 8, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, max_len=16))
    save_checkpoint(tmp_path / "t.pt", model, vocabs={})
    code, _, err = _cli(capsys, ["lm", "sample", "--run", str(tmp_path / "t.pt")])
    _one_line_error(code, err)
    assert "not a language-model checkpoint" in err
    code, _, err = _cli(capsys, ["translate", "--checkpoint", str(gpt_run)])
    _one_line_error(code, err)
    code, _, err = _cli(capsys, ["lm", "sample", "--run", str(tmp_path / "none")])
    _one_line_error(code, err)


# --- the masked objective ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bert")
    code = main(_train(out, "--max-steps", "3", "--objective", "masked"))
    assert code == 0
    return out


def test_masked_run_has_the_mask_id(bert_run):
    ckpt = load_checkpoint(bert_run / "last.pt")
    model = build_model(ckpt)
    size = len(_tokenizer())
    assert isinstance(model, MaskedLanguageModel) and model.config.vocab_size == size + 1
    assert ckpt["vocabs"]["lm"]["mask_id"] == size
    assert json.loads((bert_run / "run.json").read_text())["objective"] == "masked"


def test_masked_run_prints_the_masked_tokens_perplexity(bert_run, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(bert_run, run)
    code, out, err = _cli(capsys, _train(run, "--max-steps", "4", "--objective", "masked",
                                         "--resume"))
    assert code == 0, err
    assert re.search(r"validation cross-entropy \(masked tokens\) [\d.]+ nats/token, "
                     r"perplexity [\d.]+", out), out


def test_greedy_fill_in_is_the_argmax_at_each_blank(bert_run, capsys):
    model, tokenizer = build_model(bert_run / "best.pt"), _tokenizer()
    mask_id = len(tokenizer)
    ids = [BOS_ID, *tokenizer.encode("A dog"), mask_id, *tokenizer.encode("in the"), mask_id,
           *tokenizer.encode("grass"), EOS_ID]
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    logits[:, [PAD_ID, BOS_ID, EOS_ID, UNK_ID, mask_id]] = -math.inf
    filled = [int(logits[i].argmax()) if t == mask_id else t for i, t in enumerate(ids)]
    lines = _sample(capsys, bert_run, "--prompt", "A dog [MASK] in the [MASK] grass",
                    "--temperature", "0")
    assert lines == [one_line(tokenizer.decode(filled))]


def test_fill_in_with_a_seed_repeats_and_needs_a_blank(bert_run, capsys):
    argv = ("--prompt", "[MASK] man [MASK].", "--num-samples", "4", "--seed", "3")
    first = _sample(capsys, bert_run, *argv)
    assert len(first) == 4 and _sample(capsys, bert_run, *argv) == first
    code, _, err = _cli(capsys, ["lm", "sample", "--run", str(bert_run), "--prompt", "A dog"])
    _one_line_error(code, err)
    assert "masked language model" in err and "[MASK]" in err
