"""benchmarks/campaign_translator.py: the rule that picks the translator's
vocabulary and tying, and what ``apply`` writes (preset and chapter 10's copy)."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

PRESETS = Path(__file__).resolve().parents[1] / "minitransformer" / "training" / "presets.py"


@pytest.fixture(scope="module")
def campaign(benchmarks_path):
    import campaign_translator

    return campaign_translator


CONFIGS = {
    "bpe4000 three-way": {"vocab_size": 4000, "tying": "three-way"},
    "bpe8000 three-way": {"vocab_size": 8000, "tying": "three-way"},
    "bpe8000 untied": {"vocab_size": 8000, "tying": "untied"},
}


def dict_values(path: Path, name: str) -> dict:
    """The literal entries of the module-level dict ``name`` in ``path`` (read
    by Python's parser, not by the regular expressions ``apply`` uses)."""
    for node in ast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == name:
            value = node.value  # a dict literal, or Preset(Class, {dict literal})
            if isinstance(value, ast.Call):
                value = next(a for a in value.args if isinstance(a, ast.Dict))
            return {ast.literal_eval(k): ast.literal_eval(v)
                    for k, v in zip(value.keys, value.values)}
    raise AssertionError(f"no {name} in {path}")


def runs(scores: dict[str, list[float]]) -> list[dict]:
    return [{"name": n, "seed": s, "val_beam4": {"bleu": b}}
            for n, bleus in scores.items() for s, b in enumerate(bleus)]


def test_summary_is_mean_min_max_over_seeds(campaign):
    summary = campaign.summarise(runs({"bpe8000 three-way": [30.0, 31.0, 32.5]}))
    assert summary == {"bpe8000 three-way": {"mean": 31.17, "min": 30.0, "max": 32.5,
                                             "seeds": 3}}


def test_clear_winner_wins(campaign):
    summary = campaign.summarise(runs({"bpe4000 three-way": [30.0, 30.5, 31.0],
                                       "bpe8000 untied": [33.0, 33.2, 33.4]}))
    assert campaign.choose(summary, CONFIGS) == "bpe8000 untied"


def test_within_the_spread_the_smaller_vocabulary_then_tying_is_preferred(campaign):
    # best mean 33.2 with spread 1.0: 32.5 is within it, and 4,000 < 8,000
    summary = campaign.summarise(runs({"bpe4000 three-way": [32.0, 32.5, 33.0],
                                       "bpe8000 untied": [32.7, 33.2, 33.7]}))
    assert campaign.choose(summary, CONFIGS) == "bpe4000 three-way"
    # same size: the three-way tie is preferred over a slightly better untied model
    summary = campaign.summarise(runs({"bpe8000 three-way": [32.0, 32.5, 33.0],
                                       "bpe8000 untied": [32.7, 33.2, 33.7]}))
    assert campaign.choose(summary, CONFIGS) == "bpe8000 three-way"


def test_only_configurations_with_three_seeds_compete(campaign):
    # a single lucky seed of 40 does not beat a three-seed mean
    summary = campaign.summarise(runs({"bpe4000 three-way": [40.0],
                                       "bpe8000 three-way": [33.0, 33.1, 33.2],
                                       "bpe8000 untied": [30.0, 30.1, 30.2]}))
    assert campaign.choose(summary, CONFIGS) == "bpe8000 three-way"


@pytest.mark.parametrize("tying, share, tie", [("three-way", True, True),
                                               ("shared embeddings", True, False),
                                               ("untied", False, False)])
def test_apply_edits_the_preset_and_writes_the_chapters_copy(campaign, tmp_path, monkeypatch,
                                                             tying, share, tie):
    presets = tmp_path / "presets.py"
    original = PRESETS.read_text()
    presets.write_text(original)
    book_copy = tmp_path / "vocab_choice.json"
    monkeypatch.setattr(campaign, "PRESETS", presets)
    monkeypatch.setattr(campaign, "BOOK_COPY", book_copy)
    record = {
        "what": "w", "script": "s", "command": "c", "date": "d", "minutes_per_run": 10,
        "summary": {}, "chosen": "x", "chosen_config": {"vocab_size": 6000, "tying": tying},
        "machine_before": {"cpu": "CPU", "torch_threads": 2, "flags": {"avx2": True},
                           "matmul_1024_gflops": {"wall": 190.0}},
        "runs": [{"name": "x", "seed": 0, "steps": 5, "valid_loss": 2.0, "folder": "/tmp/x",
                  "val_beam4": {"bleu": 1.0}}],
    }
    result = tmp_path / "choice.json"
    result.write_text(json.dumps(record))
    campaign.cmd_apply(argparse.Namespace(result=result))

    assert dict_values(presets, "CPU_TOKENIZERS")["vocab_size"] == 6000
    model = dict_values(presets, "CPU_MODEL")
    assert model["share_embeddings"] is share and model["tie_output"] is tie
    assert dict_values(presets, "CPU_TRAINING") == dict_values(  # nothing else touched
        PRESETS, "CPU_TRAINING")
    copy = json.loads(book_copy.read_text())
    assert copy["chosen_config"] == {"vocab_size": 6000, "tying": tying}
    assert copy["runs"] == [{"name": "x", "seed": 0, "steps": 5, "valid_loss": 2.0,
                             "val_beam4": {"bleu": 1.0}}]  # no local folders
    assert copy["machine_before"] == {"cpu": "CPU", "torch_threads": 2,
                                      "matmul_1024_gflops": {"wall": 190.0}}
    assert "three seeds" in copy["rule"]


def test_apply_refuses_a_word_level_winner(campaign, tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "PRESETS", tmp_path / "never_written.py")
    result = tmp_path / "choice.json"
    result.write_text(json.dumps({"chosen_config": {"vocab_size": None, "tying": "untied"}}))
    with pytest.raises(SystemExit, match="word-level"):
        campaign.cmd_apply(argparse.Namespace(result=result))
