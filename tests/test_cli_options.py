"""The ``train`` flags come from the config dataclasses' fields
(minitransformer.training.options), and the presets are partial configs: a
field added to a config reaches its flag, the config built from the flags
and ``--resume``'s comparison without an edit to the command line."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from minitransformer import cli
from minitransformer.data import build_tokenizers, load_multi30k
from minitransformer.model import TransformerConfig
from minitransformer.training import TrainConfig, options, recipe
from minitransformer.training.options import SET_BY_CALLER, flag, number
from minitransformer.training.presets import (
    CPU_MODEL,
    CPU_TRAINING,
    Preset,
    cpu_model_config,
    cpu_train_config,
)
from minitransformer.training.runs import RunError, config_differences

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"


def _flags(parser: argparse.ArgumentParser, command: str = "train") -> dict[str, argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices[command]._actions for s in a.option_strings}


def test_every_config_field_has_its_flag():
    flags = _flags(cli.build_parser())
    for cls in (TransformerConfig, TrainConfig):
        for f in dataclasses.fields(cls):
            if f.name not in SET_BY_CALLER:
                assert flags[flag(f.name)].dest == f.name, f.name
    # today's names, which the README, the notebooks and the tests use
    for name in ("--heads", "--encoder-layers", "--decoder-layers", "--warmup", "--ema",
                 "--minutes", "--post-ln", "--d-model", "--d-ff", "--tie-output",
                 "--share-embeddings", "--label-smoothing", "--max-steps", "--eval-every"):
        assert name in flags, name


@pytest.fixture
def qk_norm(monkeypatch):
    """A model config with one more field, put where ``train`` reads its class."""
    cls = dataclasses.make_dataclass(
        "QKNormConfig", [("qk_norm", bool, dataclasses.field(default=False))],
        bases=(TransformerConfig,))
    monkeypatch.setattr(options, "MODEL_CONFIG", cls)
    return cls


def test_a_new_model_field_gets_a_flag_and_reaches_the_config(qk_norm):
    parser = cli.build_parser()
    assert "--qk-norm" in _flags(parser) and "--no-qk-norm" in _flags(parser)
    args = parser.parse_args(["train", "--out", "x", "--qk-norm"])
    config = recipe.model_config_from_flags(args, 10, 10)
    assert isinstance(config, qk_norm) and config.qk_norm is True
    args = parser.parse_args(["train", "--out", "x"])
    default = recipe.model_config_from_flags(args, 10, 10)
    assert default.qk_norm is False
    # everything else is still the preset's
    assert {k: getattr(default, k) for k in CPU_MODEL} == dict(CPU_MODEL)


def test_a_new_train_field_gets_a_flag_and_reaches_the_config(monkeypatch):
    cls = dataclasses.make_dataclass(
        "AccumConfig", [("grad_accum", int, dataclasses.field(default=1))], bases=(TrainConfig,))
    monkeypatch.setattr(options, "TRAIN_CONFIG", cls)
    args = cli.build_parser().parse_args(["train", "--out", "x", "--grad-accum", "4"])
    assert recipe.train_config_from_flags(args).grad_accum == 4
    code = cli.main(["train", "--out", "x", "--grad-accum", "0"])
    assert code == 2  # ints default to positive


def _words(tmp_path):
    pairs = load_multi30k("train", root=FIXTURES, download=False)
    return build_tokenizers(pairs, "words", min_freq=1)


def _resume_args(tmp_path, *flags: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["train", "--out", str(tmp_path), "--tokenizer",
                                          "words", "--min-freq", "1", *flags])


def test_resume_compares_a_new_field_filling_an_older_run_with_its_default(
        qk_norm, tmp_path, monkeypatch):
    """An older run's stored config lacks ``qk_norm``: it counts as the
    default (False), so resuming without the flag passes and with it fails,
    naming the flag."""
    src, tgt = _words(tmp_path)
    older = TransformerConfig(len(src), len(tgt), **CPU_MODEL, max_len=256).to_dict()
    assert "qk_norm" not in older
    ckpt = {"model_config": older, "vocabs": {"src": src.to_dict(), "tgt": tgt.to_dict()},
            "optimizer_state": {"x": 1}, "train_state": {"step": 1}, "rng": {"x": 1}}
    monkeypatch.setattr(recipe, "load_checkpoint", lambda *a, **k: ckpt)
    args = _resume_args(tmp_path, "--share-embeddings", "--no-share-embeddings")
    config = recipe.model_config_from_flags(args, len(src), len(tgt))
    recipe.check_resume_flags(args, src, tgt, config)  # no error
    args = _resume_args(tmp_path, "--qk-norm", "--d-model", "128")
    with pytest.raises(RunError) as err:
        config = recipe.model_config_from_flags(args, len(src), len(tgt))
        recipe.check_resume_flags(args, src, tgt, config)
    message = str(err.value)
    assert "--qk-norm True (run: False)" in message and "--d-model 128 (run: 256)" in message
    assert "\n" not in message  # every difference, one line


def test_config_differences_lists_every_field():
    stored = {**TransformerConfig(10, 10).to_dict(), "d_model": 64, "gone": 1}
    del stored["dropout"]  # an older run: its default counts
    wanted = TransformerConfig(10, 10, num_heads=4)
    assert config_differences(stored, wanted) == [
        "d_model 512 (run: 64)", "num_heads 4 (run: 8)", "gone unknown here (run: 1)"]


@pytest.mark.parametrize("factory, good, bad", [
    (number(int, 1), ["1", "7"], ["0", "-3", "1.5", "x"]),
    (number(int, 0), ["0", "9"], ["-1"]),
    (number(float, 0, 1), ["0", "0.5", "0.999"], ["1", "-0.1", "nan", "inf"]),
    (number(float, 0, open_low=True), ["1e-9", "3"], ["0", "-1", "inf"]),
    (number(float), ["-1000", "0", "2.5"], ["nan", "inf", "-inf", "a"]),
    (number(int, 0, 2**64), ["0", str(2**64 - 1)], [str(2**64), "-1"]),
])
def test_number_accepts_exactly_its_range(factory, good, bad):
    for text in good:
        assert factory(text) == (int(text) if "." not in text and "e" not in text
                                 else float(text))
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected .*got .*{text[:2]}"):
            factory(text)


def test_presets_are_checked_partial_configs():
    assert isinstance(CPU_MODEL, Preset) and CPU_MODEL.config_class is TransformerConfig
    assert isinstance(CPU_TRAINING, Preset) and CPU_TRAINING.config_class is TrainConfig
    with pytest.raises(TypeError, match="no field d_modle"):
        Preset(TransformerConfig, {"d_modle": 3})
    # the builders give what the config classes give for the preset's values
    assert cpu_model_config(10, 12, dropout=0.3) == TransformerConfig(
        10, 12, **{**dict(CPU_MODEL), "dropout": 0.3}, max_len=256)
    assert cpu_train_config(max_steps=5) == TrainConfig(**dict(CPU_TRAINING), max_steps=5)
    with pytest.raises(TypeError):
        CPU_MODEL["d_model"] = 3  # read-only
