"""End-to-end tests of the command line (minitransformer.cli) on a tiny template corpus.

A tiny Transformer is trained for a few steps on tests/fixtures/multi30k (80
made-up German-English pairs); translate and evaluate are checked against the
library's own functions and sacreBLEU called directly, and the error cases
(missing or corrupt checkpoint, bad arguments, missing corpus) must give exit
status 2 and one message on stderr, never a traceback.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from cli_helpers import assert_one_line_error, help_entries, part_flags

from minitransformer.cli import build_parser, main, parse_args
from minitransformer.data import SubwordTokenizer, Vocab, tokenizer_from_dict
from minitransformer.decoding import translate
from minitransformer.training import options
from minitransformer.training.checkpoint import build_model, load_checkpoint
from minitransformer.training.options import DEFAULT_PRESET, PRESETS, flag
from minitransformer.training.presets import (
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    CPU_TRAINING,
    ERA_PARTS,
    cpu_model_config,
    cpu_train_config,
)
from minitransformer.training.recipe import model_config_from_flags as _model_config
from minitransformer.training.recipe import train_config_from_flags as _train_config

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"
TINY = [
    "--data-root", str(FIXTURES), "--no-download",
    "--d-model", "32", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
    "--d-ff", "64", "--min-freq", "1", "--vocab-size", "400", "--max-tokens", "256",
    "--warmup", "10", "--lr", "3e-3", "--quiet", "--device", "cpu",
]


def _lines(name: str) -> list[str]:
    return gzip.decompress((FIXTURES / name).read_bytes()).decode().splitlines()


def _run(capsys, argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    code = main(["train", "--out", str(out), "--max-steps", "40", *TINY, "--tokenizer", "words"])
    assert code == 0
    return out


# --- fast: parser and errors that need no model -------------------------------


def test_train_defaults_are_the_preset():
    """`train` without options builds exactly the preset's configurations."""
    args = build_parser().parse_args(["train", "--out", "x"])
    assert _model_config(args, 10, 10) == cpu_model_config(10, 10)
    expected = cpu_train_config(epochs=None, max_minutes=args.max_minutes, checkpoint_dir="x")
    assert _train_config(args) == expected
    assert {"max_len": args.max_len, "max_tokens": args.max_tokens} == CPU_DATA
    tokenizers = {"kind": args.tokenizer, "min_freq": args.min_freq, "vocab_size": args.vocab_size,
                  "target_pieces": args.target_pieces}
    assert tokenizers == CPU_TOKENIZERS


def test_model_and_training_flags_reach_the_configs():
    args = build_parser().parse_args([
        "train", "--out", "x", "--d-model", "64", "--heads", "4", "--encoder-layers", "2",
        "--decoder-layers", "1", "--d-ff", "96", "--dropout", "0.2", "--tie-output", "--post-ln",
        "--max-len", "300", "--lr", "2e-3", "--schedule", "linear", "--warmup", "7",
        "--label-smoothing", "0", "--ema", "0", "--max-steps", "9",
    ])
    m = _model_config(args, 10, 10)
    assert (m.d_model, m.num_heads, m.num_encoder_layers, m.num_decoder_layers, m.d_ff) == (
        64, 4, 2, 1, 96)
    assert m.dropout == 0.2 and m.tie_output and not m.norm_first and m.max_len >= 302
    t = _train_config(args)
    assert (t.lr, t.schedule, t.warmup_steps, t.label_smoothing, t.max_steps) == (
        2e-3, "linear", 7, 0.0, 9)
    assert t.ema_decay is None  # --ema 0: the weights as trained


# --- --preset: the 2017 or the 2020s parts -----------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_the_preset_gives_its_translator(preset):
    """`train --preset P` builds the CPU translator of era P (the same
    training), as `cpu_model_config(..., era=P)` does; `build_parser(P)` too."""
    args = parse_args(["train", "--out", "x", "--preset", preset])
    assert args.preset == preset
    assert _model_config(args, 10, 12) == cpu_model_config(10, 12, era=preset)
    assert _train_config(args) == cpu_train_config(epochs=None, max_minutes=args.max_minutes,
                                                   checkpoint_dir="x")
    args = build_parser(preset).parse_args(["train", "--out", "x"])
    assert args.preset == preset
    assert _model_config(args, 10, 12) == cpu_model_config(10, 12, era=preset)
    assert build_parser().parse_args(["train", "--out", "x"]).preset == DEFAULT_PRESET


def test_an_explicit_flag_overrides_the_preset():
    args = parse_args(["train", "--out", "x", "--preset", "2020s", "--norm", "layernorm",
                       "--d-ff", "96"])
    assert _model_config(args, 10, 10) == cpu_model_config(10, 10, era="2020s",
                                                           norm="layernorm", d_ff=96)
    args = parse_args(["train", "--out", "x", "--feed-forward", "swiglu"])
    assert _model_config(args, 10, 10) == cpu_model_config(10, 10, feed_forward="swiglu")
    # every part of 2017 asked for under --preset 2020s: the 2017 parts, the 2020s sizes
    # (--num-kv-heads 0: one key/value head per query head, None in the config)
    args = parse_args(["train", "--out", "x", "--preset", "2020s",
                       *part_flags(ERA_PARTS["2017"])])
    config = _model_config(args, 10, 10)
    assert config == cpu_model_config(10, 10, era="2020s", **ERA_PARTS["2017"])
    old = cpu_model_config(10, 10, era="2017")
    assert all(getattr(config, k) == getattr(old, k) for k in ERA_PARTS["2017"])


@pytest.mark.parametrize("preset", PRESETS)
def test_help_shows_the_presets_defaults(capsys, preset):
    code, out, _ = _run(capsys, ["train", "--preset", preset, "--help"])
    assert code == 0
    entries = help_entries(out)
    assert "(default: " + preset + ")" in entries["--preset"]
    config, checked = cpu_model_config(10, 10, era=preset), set()
    for f, _ in options.config_fields(options.MODEL_CONFIG):
        if "default:" in options.HELP.get(f.name, ""):  # says its default in words
            continue
        value = getattr(config, f.name)
        shown = 0 if value is None and f.name in options.ZERO_IS_NONE else value
        assert f"(default: {shown})" in entries[flag(f.name)], (f.name, entries[flag(f.name)])
        checked.add(f.name)
    assert set(ERA_PARTS[preset]) - {"norm_first"} <= checked
    if preset == DEFAULT_PRESET:  # what --help shows without --preset
        assert _run(capsys, ["train", "--help"])[1] == out


@pytest.mark.parametrize("argv, message", [
    (["train", "--out", "x", "--preset", "1990s"], "argument --preset: invalid choice: '1990s'"),
    (["train", "--out", "x", "--preset"], "argument --preset: expected one argument"),
])
def test_a_bad_preset_is_one_line(capsys, argv, message):
    code, out, err = _run(capsys, argv)
    assert_one_line_error(code, err)
    assert message in err and out == ""


def test_run_json_records_the_preset_and_resume_keeps_it(capsys, tmp_path):
    out, tiny = tmp_path / "run", [*TINY, "--tokenizer", "words", "--no-bleu"]
    code, _, err = _run(capsys, ["train", "--out", str(out), "--preset", "2020s",
                                 "--max-steps", "1", *tiny])
    assert code == 0, err
    assert json.loads((out / "run.json").read_text())["preset"] == "2020s"
    stored = load_checkpoint(out / "last.pt")["model_config"]
    assert {k: stored[k] for k in ERA_PARTS["2020s"]} == ERA_PARTS["2020s"]
    # without --preset (the 2017 parts): refused, naming the preset and the parts
    code, _, err = _run(capsys, ["train", "--out", str(out), "--resume", "--max-steps", "2",
                                 *tiny])
    assert_one_line_error(code, err)
    assert "--preset 2017 (run: 2020s)" in err and "--norm layernorm (run: rmsnorm)" in err
    # the same model asked for part by part under the other preset: still refused
    code, _, err = _run(capsys, ["train", "--out", str(out), "--resume", "--max-steps", "2",
                                 *tiny, *part_flags(ERA_PARTS["2020s"])])
    assert_one_line_error(code, err)
    assert "--preset 2017 (run: 2020s)" in err and "--norm" not in err
    code, _, err = _run(capsys, ["train", "--out", str(out), "--resume", "--max-steps", "2",
                                 "--preset", "2020s", *tiny])
    assert code == 0, err
    assert json.loads((out / "history.json").read_text())["step"][-1] == 2
    assert json.loads((out / "run.json").read_text())["preset"] == "2020s"


def _call_keywords(code: str, function: str) -> dict[str, list[str]]:
    """``{keyword: [its source text in each call]}`` for the calls of ``function`` in ``code``."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function:
            for k in node.keywords:
                found.setdefault(k.arg, []).append(ast.unparse(k.value))
    return found


def _assigned_call_keywords(code: str, target: str, function: str) -> dict[str, str] | None:
    """``{keyword: source}`` of the call ``target = function(...)`` in ``code`` (None if none)."""
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == target
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == function):
            return {k.arg: ast.unparse(k.value) for k in node.value.keywords}
    return None


def test_chapter_10_trains_the_preset():
    """The chapter and `python -m minitransformer train` must not drift apart:
    the benchmarks measure the one and the book shows the other. The chapter
    builds the model it trains (``model = Transformer(config)``) from
    ``config = cpu_model_config(...)`` without overriding the preset's settings
    (other configurations, e.g. the paper's tying for a parameter count, may
    override), trains with the preset's settings, and takes its data settings
    from CPU_TOKENIZERS and CPU_DATA."""
    nb = Path(__file__).resolve().parents[1] / "notebooks" / "10_translation_end_to_end.ipynb"
    code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                     if c["cell_type"] == "code")
    model_kw = _assigned_call_keywords(code, "config", "cpu_model_config")
    train_kw = _call_keywords(code, "cpu_train_config")
    assert model_kw is not None, "chapter 10 has no `config = cpu_model_config(...)`"
    assert re.search(r"^model = Transformer\(config\)$", code, re.M)
    assert re.search(r"^history = fit\(\s*model,", code, re.M)
    assert "cpu_train_config(" in code
    assert not set(model_kw) & set(CPU_MODEL), model_kw
    assert not set(train_kw) & set(CPU_TRAINING), train_kw
    assert "TransformerConfig(" not in code and "TrainConfig(" not in code
    data_kw: dict[str, list[str]] = {}
    for function in ("build_vocabs", "encode_pairs", "TokenBatcher"):
        for name, values in _call_keywords(code, function).items():
            data_kw.setdefault(name, []).extend(values)
    preset = {"min_freq": "CPU_TOKENIZERS", "max_len": "CPU_DATA", "max_tokens": "CPU_DATA"}
    for name, where in preset.items():  # every min_freq= / max_len= / max_tokens= reads it
        assert data_kw.get(name), f"chapter 10 passes no {name}="
        assert all(v == f"{where}['{name}']" for v in data_kw[name]), (name, data_kw[name])


@pytest.mark.parametrize("command", ["train", "translate", "evaluate"])
def test_help_of_each_command(capsys, command):
    code, out, _ = _run(capsys, [command, "--help"])
    assert code == 0
    assert f"usage: python -m minitransformer {command}" in out
    flag = {"train": "--minutes", "translate": "--beam", "evaluate": "--split"}[command]
    assert flag in out


@pytest.mark.parametrize("argv, message", [
    (["translate", "--checkpoint", "x", "--beam", "0"], "--beam: expected a positive integer"),
    (["evaluate", "--checkpoint", "x", "--split", "dev"], "invalid choice"),
    (["train", "--out", "x", "--minutes", "-1"], "expected a positive number"),
    (["train", "--out", "x", "--ema", "1"], "expected a number in [0, 1)"),
    (["train"], "required: --out"),
    (["fly"], "invalid choice"),
    ([], "required"),
])
def test_bad_arguments_exit_2(capsys, argv, message):
    code, out, err = _run(capsys, argv)
    assert code == 2 and message in err and "Traceback" not in err and out == ""


def test_missing_checkpoint_exit_2(capsys, tmp_path):
    code, out, err = _run(capsys, ["translate", "--checkpoint", str(tmp_path / "nope")])
    assert code == 2 and "does not exist" in err and out == ""
    code, _, err = _run(capsys, ["evaluate", "--checkpoint", str(tmp_path)])
    assert code == 2 and "no checkpoint in" in err


def test_train_argument_errors_exit_2(capsys, tmp_path):
    code, _, err = _run(capsys, ["train", "--out", str(tmp_path / "o"), *TINY, "--heads", "3"])
    assert code == 2 and "divisible" in err and "Traceback" not in err
    code, _, err = _run(capsys, ["train", "--out", str(tmp_path / "o"), *TINY,
                                 "--device", "warp-drive"])
    assert code == 2 and "--device" in err


def test_missing_corpus_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("MINITRANSFORMER_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = ["train", "--out", str(tmp_path / "o"), "--no-download", "--data-root",
            str(tmp_path / "empty")]
    code, _, err = _run(capsys, argv)
    assert code == 2 and "not found" in err and "MINITRANSFORMER_DATA" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_module_entry_point_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    r = subprocess.run([sys.executable, "-m", "minitransformer", "translate", "--checkpoint",
                        str(tmp_path / "missing")], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 2
    assert "error: checkpoint" in r.stderr and "Traceback" not in r.stderr and r.stdout == ""


# --- slow: a trained tiny model -----------------------------------------------


@pytest.mark.slow
def test_train_writes_checkpoints_vocabs_and_history(trained):
    for name in ("last.pt", "best.pt", "src_vocab.json", "tgt_vocab.json", "history.json",
                 "run.json"):
        assert (trained / name).is_file(), name
    ckpt = torch.load(trained / "last.pt", weights_only=True)
    assert Vocab.from_dict(ckpt["vocabs"]["src"]) == Vocab.load(trained / "src_vocab.json")
    assert ckpt["model_config"]["norm_first"] is True  # pre-LN by default
    assert ckpt["model_config"]["d_model"] == 32
    history = json.loads((trained / "history.json").read_text())
    assert history["step"][-1] == 40 and history["stop_reason"] == "max_steps"
    assert history["valid_loss"]  # validated before saving
    run = json.loads((trained / "run.json").read_text())
    assert (run["src_lang"], run["tgt_lang"]) == ("de", "en")
    # Training lowered the loss.
    assert sum(history["train_loss"][-5:]) < sum(history["train_loss"][:5])


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 3])
def test_translate_one_line_per_input_line(trained, capsys, monkeypatch, beam):
    sources = _lines("test_2016_flickr.de.gz")[:4]
    text = "\n".join([sources[0], "", sources[1], "   ", sources[2], sources[3]]) + "\n"
    code, out, err = _run(capsys, ["translate", "--checkpoint", str(trained), "--device", "cpu",
                                   "--beam", str(beam)], stdin=text, monkeypatch=monkeypatch)
    assert code == 0, err
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 6  # exactly one line per input line
    assert lines[1] == "" and lines[3] == ""  # empty (or blank) in, empty out
    # The same as the library on the model rebuilt independently from best.pt.
    model = build_model(trained / "best.pt")
    expected = translate(model, sources, Vocab.load(trained / "src_vocab.json"),
                         Vocab.load(trained / "tgt_vocab.json"), beam_size=beam)
    assert [lines[0], lines[2], lines[4], lines[5]] == expected
    assert all(line == line.strip() and line == line.lower() for line in lines)


@pytest.mark.slow
def test_translate_without_final_newline(trained, capsys, monkeypatch):
    code, out, _ = _run(capsys, ["translate", "--checkpoint", str(trained / "last.pt")],
                        stdin="Ein Hund läuft.\r\nEin Kind sitzt.", monkeypatch=monkeypatch)
    assert code == 0 and out.count("\n") == 2 and "\r" not in out
    code, out, _ = _run(capsys, ["translate", "--checkpoint", str(trained)], stdin="",
                        monkeypatch=monkeypatch)
    assert code == 0 and out == ""


@pytest.mark.slow
def test_evaluate_prints_sacrebleu_scores_and_signatures(trained, capsys, tmp_path):
    """Cased BLEU (the headline), lower-cased BLEU and chrF, each as sacreBLEU
    computes them directly, each followed by its signature."""
    hyp_file = tmp_path / "hyp.txt"
    code, out, err = _run(capsys, ["evaluate", "--checkpoint", str(trained), "--split",
                                   "test_2016_flickr", "--data-root", str(FIXTURES),
                                   "--no-download", "--output", str(hyp_file)])
    assert code == 0, err
    hyps = hyp_file.read_text().split("\n")[:-1]
    refs = _lines("test_2016_flickr.en.gz")
    assert len(hyps) == len(refs) == 8
    _check_printed_scores(out, hyps, refs)


def _check_printed_scores(out: str, hyps: list[str], refs: list[str]) -> None:
    cased = float(re.search(r"^BLEU = ([0-9.]+)", out, re.M).group(1))
    lower = float(re.search(r"^BLEU \(lowercased\) = ([0-9.]+)", out, re.M).group(1))
    chrf = float(re.search(r"^chrF2 = ([0-9.]+)", out, re.M).group(1))
    assert cased == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=0.01)
    assert lower == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score, abs=0.01)
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=0.01)
    signatures = re.findall(r"^signature: (.*)$", out, re.M)
    assert len(signatures) == 3
    assert signatures[0].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert signatures[1].startswith("nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:")
    assert signatures[2].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")


@pytest.fixture(scope="module")
def trained_subword(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run_subword")
    code = main(["train", "--out", str(out), "--max-steps", "150", *TINY])  # the defaults
    assert code == 0
    return out


def test_defaults_are_the_presets_subwords():
    args = build_parser().parse_args(["train", "--out", "x"])
    assert args.tokenizer == "subword"
    config = _model_config(args, 8000, 8000)
    assert config.share_embeddings == CPU_MODEL["share_embeddings"]
    assert config.tie_output == CPU_MODEL["tie_output"]
    tied = _model_config(build_parser().parse_args(
        ["train", "--out", "x", "--share-embeddings", "--tie-output", "--target-pieces", "all"]),
        8000, 8000)
    assert tied.share_embeddings and tied.tie_output  # the paper's tying, on request
    words = build_parser().parse_args(["train", "--out", "x", "--tokenizer", "words"])
    config = _model_config(words, 10, 12)  # two vocabularies: nothing to share
    assert not config.share_embeddings and config.tie_output == CPU_MODEL["tie_output"]


@pytest.mark.slow
def test_subword_run_is_self_contained_and_translates_cased_without_unk(
    trained_subword, capsys, monkeypatch
):
    """The defaults: cased output, no unknown-word marker, even for characters
    never seen in training (emoji, CJK, accented capitals)."""
    run = trained_subword
    assert (run / "tokenizer.model").is_file() and not (run / "src_vocab.json").exists()
    ckpt = torch.load(run / "last.pt", weights_only=True)  # the tokenizer travels inside
    tok = tokenizer_from_dict(ckpt["vocabs"]["src"])
    assert tok == SubwordTokenizer.load(run / "tokenizer.model") and len(tok) == 400
    tgt = tokenizer_from_dict(ckpt["vocabs"]["tgt"])  # the preset: the targets' pieces only
    assert tgt == tok.restricted_to(_lines("train.en.gz")) and len(tgt) < len(tok)
    assert ckpt["model_config"]["tgt_vocab_size"] == len(tgt)
    assert ckpt["model_config"]["src_vocab_size"] == len(tok)
    assert ckpt["model_config"]["share_embeddings"] == CPU_MODEL["share_embeddings"]
    assert ckpt["model_config"]["tie_output"] == CPU_MODEL["tie_output"]
    assert json.loads((run / "run.json").read_text())["lowercase"] is False
    unseen = ["Ein 😀 läuft über 漢字 im ÆØÅ-Park.", "ÉMILE UND ÖZİL SPIELEN 🎉🎉 AM STRAND.",
              "李明 läuft.", "Ein Hund 🐕 sitzt im Schnee ❄."]
    train_text = "".join(_lines("train.de.gz") + _lines("train.en.gz"))
    assert all(any(c not in train_text for c in s) for s in unseen)  # never seen in training
    assert all(not any(p == "<unk>" for p in tok.pieces(s)) and tok.decode(tok.encode(s)) == s
               for s in unseen)  # spelled without <unk>, and losslessly
    sources = _lines("test_2016_flickr.de.gz")[:3] + unseen
    for beam in ("1", "2"):
        code, out, err = _run(capsys, ["translate", "--checkpoint", str(run), "--beam", beam],
                              stdin="\n".join(sources) + "\n", monkeypatch=monkeypatch)
        assert code == 0, err
        lines = out.split("\n")[:-1]
        assert len(lines) == len(sources) and all(lines)
        assert not any("<unk>" in line or "\u2047" in line for line in lines), lines
        assert all(line[0].isupper() for line in lines), lines  # cased, like the references
        expected = translate(build_model(run / "best.pt"), sources, tok, tgt, beam_size=int(beam))
        assert lines == [" ".join(e.split()) for e in expected]


@pytest.mark.slow
def test_subword_run_evaluates_and_resumes(trained_subword, capsys, tmp_path):
    hyp_file = tmp_path / "hyp.txt"
    code, out, err = _run(capsys, ["evaluate", "--checkpoint", str(trained_subword), "--split",
                                   "test_2016_flickr", "--data-root", str(FIXTURES),
                                   "--no-download", "--output", str(hyp_file)])
    assert code == 0, err
    _check_printed_scores(out, hyp_file.read_text().split("\n")[:-1],
                          _lines("test_2016_flickr.en.gz"))
    code, out, err = _run(capsys, [
        "train", "--out", str(trained_subword), "--resume", "--max-steps", "155", *TINY,
        "--no-bleu"])
    assert code == 0, err
    assert json.loads((trained_subword / "history.json").read_text())["step"][-1] == 155
    code, _, err = _run(capsys, [
        "train", "--out", str(trained_subword), "--resume", "--max-steps", "160", *TINY,
        "--vocab-size", "300"])
    assert code == 2 and "--vocab-size 300 (run: 400)" in err
    code, _, err = _run(capsys, [
        "train", "--out", str(trained_subword), "--resume", "--max-steps", "160", *TINY,
        "--target-pieces", "all"])
    assert code == 2 and "--target-pieces all (run: seen)" in err
    info = json.loads((trained_subword / "run.json").read_text())
    del info["data"]["target_pieces"]  # a run written before the option: every piece
    (trained_subword / "run.json").write_text(json.dumps(info))
    code, _, err = _run(capsys, [
        "train", "--out", str(trained_subword), "--resume", "--max-steps", "160", *TINY])
    assert code == 2 and "--target-pieces seen (run: all)" in err


def test_share_embeddings_needs_every_target_piece(capsys, tmp_path):
    code, _, err = _run(capsys, ["train", "--out", str(tmp_path / "r"), *TINY,
                                 "--share-embeddings"])
    assert code == 2 and "--share-embeddings needs --target-pieces all" in err
    assert not (tmp_path / "r").exists()
    args = build_parser().parse_args(["train", "--out", "x", "--target-pieces", "all"])
    assert args.target_pieces == "all"


def test_share_embeddings_needs_subwords(capsys, tmp_path):
    code, _, err = _run(capsys, ["train", "--out", str(tmp_path / "r"), *TINY,
                                 "--tokenizer", "words", "--share-embeddings"])
    assert code == 2 and "--share-embeddings needs --tokenizer subword" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_corrupt_checkpoint_exit_2(trained, capsys, tmp_path, monkeypatch):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "last.pt").write_bytes((trained / "last.pt").read_bytes()[:1000])  # truncated
    code, out, err = _run(capsys, ["translate", "--checkpoint", str(bad)], stdin="Ein Mann.\n",
                          monkeypatch=monkeypatch)
    assert code == 2 and "not a readable checkpoint" in err and out == ""
    assert "Traceback" not in err
    junk = tmp_path / "junk.pt"
    torch.save({"hello": torch.zeros(1)}, junk)
    code, _, err = _run(capsys, ["evaluate", "--checkpoint", str(junk)])
    assert code == 2 and "checkpoint" in err


@pytest.mark.slow
def test_train_time_budget_and_resume(capsys, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = _run(capsys, ["train", "--out", str(out), "--minutes", "0.005",
                                      "--no-bleu", *TINY])
    assert code == 0, err
    assert "stopped (max_minutes)" in stdout and (out / "last.pt").is_file()
    first = json.loads((out / "history.json").read_text())
    assert first["stop_reason"] == "max_minutes" and first["valid_loss"]
    steps = first["step"][-1]
    code, stdout, err = _run(capsys, ["train", "--out", str(out), "--resume", "--max-steps",
                                      str(steps + 5), "--no-bleu", *TINY])
    assert code == 0, err
    assert "resuming from" in stdout
    second = json.loads((out / "history.json").read_text())
    assert second["step"] == list(range(1, steps + 6))
    assert second["train_loss"][:steps] == first["train_loss"]


@pytest.mark.slow
def test_translate_interactive_answers_each_line(trained, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("Ein Hund läuft im Park.\n\n"))
    assert main(["translate", "--checkpoint", str(trained)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and out.endswith("\n\n")


@pytest.mark.slow
def test_translate_subprocess_pipe_utf8(trained):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "PYTHONIOENCODING": ""}
    text = "Zwei Männer laufen im Schnee.\n\nEin Kind spielt am Strand.\n"
    r = subprocess.run([sys.executable, "-m", "minitransformer", "translate", "--checkpoint",
                        str(trained)], input=text.encode("utf-8"), capture_output=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode("utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert lines[0] and lines[2]


def test_preset_configs_take_overrides():
    m = cpu_model_config(10, 10, dropout=0.3, d_model=64)
    assert (m.src_vocab_size, m.tgt_vocab_size, m.dropout, m.d_model) == (10, 10, 0.3, 64)
    assert {k: getattr(m, k) for k in CPU_MODEL if k not in ("dropout", "d_model")} == {
        k: v for k, v in CPU_MODEL.items() if k not in ("dropout", "d_model")}
    assert m.max_len >= CPU_DATA["max_len"] + 2  # room for the longest pair and <bos>/<eos>
    t = cpu_train_config(max_minutes=2, ema_decay=None)
    assert t.max_minutes == 2 and t.ema_decay is None
    assert {k: getattr(t, k) for k in CPU_TRAINING if k != "ema_decay"} == {
        k: v for k, v in CPU_TRAINING.items() if k != "ema_decay"}


def test_the_cli_imports_at_the_top():
    """Imports inside functions hide what the command line depends on."""
    import minitransformer.cli as cli

    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    inside = [
        f"{fn.name}: line {node.lineno}"
        for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert not inside, inside
