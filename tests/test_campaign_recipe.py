"""benchmarks/campaign_translator.py's ``recipe`` (issue 25): the candidates
built from the preset (their flags read by the real ``train`` parser), the
rule on made-up summaries, the resume check and what ``recipe-apply`` writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from test_campaign_translator import dict_values, runs

from minitransformer.cli import parse_args
from minitransformer.training.presets import CPU_MODEL, CPU_TRAINING
from minitransformer.training.recipe import train_config_from_flags

PRESETS = Path(__file__).resolve().parents[1] / "minitransformer" / "training" / "presets.py"


@pytest.fixture(scope="module")
def campaign(benchmarks_path):
    import campaign_translator

    return campaign_translator


@pytest.fixture(scope="module")
def candidates(campaign):
    return campaign.recipe_candidates()


def test_the_default_candidates_are_the_preset_and_one_change_each(campaign, candidates):
    names = [c["name"] for c in candidates]
    assert names[0] == "preset"
    # the preset has dropout 0, label smoothing 0.1, noam, peak 1e-3, decay 0.98
    assert CPU_MODEL["dropout"] == 0.0 and CPU_TRAINING["label_smoothing"] == 0.1
    assert CPU_TRAINING["schedule"] == "noam" and CPU_TRAINING["ema_decay"] == 0.98
    assert names[1:] == ["dropout 0.1", "label smoothing 0", "schedule linear", "lr x2",
                         "lr x0.5", "ema 0", "ema 0.98", "ema 0.99", "ema 0.995", "ema 0.998"]
    trained = [c["name"] for c in candidates if c["source"] == "train"]
    assert len(trained) == 6  # x 3 seeds: the campaign's 18 runs
    baselines = {c["factor"]: c["name"] for c in candidates if c["baseline"] and c["factor"]}
    assert baselines == {"ema_decay": "ema 0.98"}  # the others compare with "preset"


def test_every_candidates_flags_give_its_settings_in_the_real_train_parser(candidates):
    for c in candidates:
        args = parse_args(["train", "--out", "somewhere", *c["options"]])
        config = train_config_from_flags(args)
        for field, value in c["settings"].items():
            got = args.dropout if field == "dropout" else getattr(config, field)
            assert got == value, (c["name"], field, got, value)
    preset = train_config_from_flags(parse_args(["train", "--out", "somewhere"]))
    assert preset.lr == CPU_TRAINING["lr"] and preset.ema_decay == CPU_TRAINING["ema_decay"]


def test_candidates_follow_the_preset_they_start_from(campaign):
    model = {**CPU_MODEL, "dropout": 0.1}
    training = {**CPU_TRAINING, "label_smoothing": 0.0, "schedule": "linear", "lr": 4e-4,
                "ema_decay": None}
    rows = {c["name"]: c for c in campaign.recipe_candidates(model, training, (0.99,))}
    assert rows["dropout 0"]["options"] == ["--dropout", "0"]
    assert rows["label smoothing 0.1"]["settings"] == {"label_smoothing": 0.1}
    assert rows["schedule noam"]["options"] == ["--schedule", "noam"]
    assert rows["lr x2"]["options"] == ["--lr", "0.0008"]
    assert rows["ema 0"]["baseline"] and rows["ema 0"]["settings"] == {"ema_decay": None}
    assert [n for n in rows if n.startswith("ema")] == ["ema 0", "ema 0.99"]


def summary_of(campaign, scores: dict[str, list[float]]) -> dict:
    return campaign.summarise(runs(scores))


def test_an_alternative_within_the_spread_keeps_the_preset(campaign, candidates):
    # dropout 0.1 is 0.5 better on average, but the preset's seeds spread over 1.0
    summary = summary_of(campaign, {"preset": [37.0, 37.5, 38.0],
                                    "dropout 0.1": [37.8, 38.0, 38.2]})
    decision = campaign.decide(summary, candidates)["dropout"]
    assert decision["chosen"] == "preset"
    assert decision["compared"] == [{"name": "dropout 0.1", "margin": 0.5, "needed": 1.0,
                                     "seeds": 3, "beats_preset": False}]
    # unmeasured factors keep the preset too
    assert campaign.decide(summary, candidates)["lr"]["chosen"] == "preset"


def test_a_clear_winner_is_taken_and_the_best_of_several(campaign, candidates):
    summary = summary_of(campaign, {"preset": [37.0, 37.2, 37.4],
                                    "lr x2": [38.0, 38.1, 38.2],
                                    "lr x0.5": [38.5, 38.6, 38.7]})
    decision = campaign.decide(summary, candidates)["lr"]
    assert decision["chosen"] == "lr x0.5"
    assert [x["beats_preset"] for x in decision["compared"]] == [True, True]


def test_a_gap_equal_to_the_spread_is_a_tie_and_keeps_the_preset(campaign, candidates):
    # margin 0.4, the larger spread 0.4: not more than it
    summary = summary_of(campaign, {"preset": [37.0, 37.2, 37.4],
                                    "schedule linear": [37.5, 37.6, 37.7]})
    assert campaign.decide(summary, candidates)["schedule"]["chosen"] == "preset"
    # two winners with the same mean: the first listed
    summary = summary_of(campaign, {"preset": [37.0, 37.1, 37.2],
                                    "lr x2": [38.0, 38.1, 38.2],
                                    "lr x0.5": [38.0, 38.1, 38.2]})
    assert campaign.decide(summary, candidates)["lr"]["chosen"] == "lr x2"


def test_fewer_seeds_than_the_preset_cannot_win(campaign, candidates):
    summary = summary_of(campaign, {"preset": [37.0, 37.1, 37.2],
                                    "label smoothing 0": [40.0]})
    assert campaign.decide(summary, candidates)["label_smoothing"]["chosen"] == "preset"


def test_the_decay_is_compared_with_the_presets_own_average(campaign, candidates):
    run = {"name": "preset", "seed": 0, "val_beam4": {"bleu": 37.0},
           "averages": {"0": {"bleu": 35.0}, "0.98": {"bleu": 37.1},
                        "0.995": {"bleu": 38.0}}}
    rows = campaign.recipe_rows([run, {**run, "seed": 1}, {**run, "seed": 2}])
    assert [r["name"] for r in rows[:4]] == ["preset", "ema 0", "ema 0.98", "ema 0.995"]
    decisions = campaign.decide(campaign.summarise(rows), candidates)
    assert decisions["ema_decay"]["baseline"] == "ema 0.98"
    assert decisions["ema_decay"]["chosen"] == "ema 0.995"
    settings, options = campaign.chosen_recipe(decisions, candidates)
    assert settings == {"ema_decay": 0.995} and options == ["--ema", "0.995"]


def test_the_winners_of_each_factor_are_combined(campaign, candidates):
    summary = summary_of(campaign, {"preset": [37.0, 37.1, 37.2],
                                    "dropout 0.1": [38.0, 38.1, 38.2],
                                    "schedule linear": [38.0, 38.1, 38.2],
                                    "lr x2": [36.0, 36.1, 36.2]})
    settings, options = campaign.chosen_recipe(campaign.decide(summary, candidates),
                                               candidates)
    assert settings == {"dropout": 0.1, "schedule": "linear"}
    assert options == ["--dropout", "0.1", "--schedule", "linear"]


def test_a_finished_run_is_not_run_again(campaign, tmp_path, monkeypatch):
    args = argparse.Namespace(out_dir=tmp_path, minutes=10.0, smoke=False)
    folder = campaign.run_folder(args, "lr x2", 1)
    assert folder == tmp_path / "lr_x2_seed1"
    folder.mkdir()
    record = {"name": "lr x2", "seed": 1, "options": ["--lr", "0.002"], "minutes_budget": 10.0,
              "smoke": False, "averages_kept": [0.99, 0.995], "val_beam4": {"bleu": 38.0},
              "preset": campaign.preset_values()}
    (folder / "result.json").write_text(json.dumps(record))

    def no_subprocess(*a, **k):
        raise AssertionError("a finished run was started again")

    monkeypatch.setattr(campaign.subprocess, "run", no_subprocess)
    got = campaign.run_config("lr x2", ["--lr", "0.002"], 1, args, [], averages=(0.99, 0.995),
                              resume=True)
    assert got == record
    finished = campaign.finished_record
    assert finished(folder, ["--lr", "0.002"], 10.0, False, (0.99, 0.995)) == {
        **record, "_from": str(folder / "result.json")}
    assert finished(folder, ["--lr", "0.002"], 5.0, False, (0.99, 0.995)) is None  # budget
    assert finished(folder, ["--lr", "0.001"], 10.0, False, (0.99, 0.995)) is None  # options
    assert finished(folder, ["--lr", "0.002"], 10.0, True, (0.99, 0.995)) is None  # smoke
    assert finished(folder, ["--lr", "0.002"], 10.0, False, (0.99,)) is None  # averages
    # the averages were not scored, so a run that needs them is redone
    assert finished(folder, ["--lr", "0.002"], 10.0, False, (0.99, 0.995), True) is None
    # made under other defaults (before recipe-apply): redone
    (folder / "result.json").write_text(json.dumps({**record, "preset": {
        **record["preset"], "lr": 5e-4}}))
    assert finished(folder, ["--lr", "0.002"], 10.0, False, (0.99, 0.995)) is None
    (folder / "result.json").write_text('{"name": "lr x2", "seed"')  # killed mid-write
    assert finished(folder, ["--lr", "0.002"], 10.0, False, (0.99, 0.995)) is None
    assert finished(tmp_path / "never_run", [], 10.0, False) is None
    # the estimate counts only the runs still to make
    args.only, args.seeds = ["lr x2"], [0, 1]
    (folder / "result.json").write_text(json.dumps(record))
    plan = campaign.recipe_plan(args, campaign.recipe_candidates())
    assert [(c["name"], s) for c, s in plan] == [("lr x2", 0), ("lr x2", 1)]
    monkeypatch.setattr(campaign, "EXTRA_DECAYS", (0.99, 0.995))
    estimate = campaign.recipe_estimate(args, plan)
    assert estimate["to_run"] == 1 and estimate["runs"] == 2
    assert estimate["estimated_minutes"] == round(10 + campaign.RUN_OVERHEAD_MINUTES)


def test_only_an_average_runs_the_preset_and_an_unknown_name_stops(campaign):
    args = argparse.Namespace(only=["ema_0.995"], seeds=[0])
    plan = campaign.recipe_plan(args, campaign.recipe_candidates())
    assert [c["name"] for c, _ in plan] == ["preset"]
    with pytest.raises(SystemExit, match="no candidate dropout 0.3"):
        campaign.recipe_plan(argparse.Namespace(only=["dropout 0.3"], seeds=[0]),
                             campaign.recipe_candidates())


def choice_record(**changes) -> dict:
    return {
        "what": "w", "script": "s", "command": "c", "date": "d", "minutes_per_run": 10,
        "seeds": [0, 1, 2], "rule": "r", "summary": {}, "decisions": {}, "smoke": False,
        "preset": {}, "chosen_options": [],
        "chosen_settings": {"dropout": 0.1, "lr": 0.002, "schedule": "linear",
                            "label_smoothing": 0.0, "ema_decay": None},
        "machine_before": {"cpu": "CPU", "torch_threads": 2, "flags": {"avx2": True},
                           "matmul_1024_gflops": {"wall": 190.0}},
        "runs": [{"name": "preset", "seed": 0, "steps": 5, "valid_loss": 2.0,
                  "folder": "/tmp/x", "val_beam4": {"bleu": 1.0},
                  "averages": {"0": {"bleu": 0.5}}}],
        **changes,
    }


def test_recipe_apply_writes_the_chosen_fields_into_the_right_presets(campaign, tmp_path,
                                                                      monkeypatch):
    presets = tmp_path / "presets.py"
    original = PRESETS.read_text()
    presets.write_text(original)
    monkeypatch.setattr(campaign, "PRESETS", presets)
    result, book_copy = tmp_path / "recipe_choice.json", tmp_path / "copy.json"
    result.write_text(json.dumps(choice_record()))
    campaign.cmd_recipe_apply(argparse.Namespace(result=result, book_copy=book_copy,
                                                 force=False))
    model, training = dict_values(presets, "CPU_MODEL"), dict_values(presets, "CPU_TRAINING")
    assert model["dropout"] == 0.1
    assert (training["lr"], training["schedule"], training["label_smoothing"],
            training["ema_decay"]) == (0.002, "linear", 0.0, None)
    old_model, old_training = dict_values(PRESETS, "CPU_MODEL"), dict_values(PRESETS,
                                                                            "CPU_TRAINING")
    assert {k: v for k, v in model.items() if k != "dropout"} == {
        k: v for k, v in old_model.items() if k != "dropout"}
    assert training["warmup_steps"] == old_training["warmup_steps"]
    assert training["amp"] == old_training["amp"]
    # nothing outside the two dicts changed (the language model's presets refer to them)
    changed = [(a, b) for a, b in zip(original.splitlines(), presets.read_text().splitlines())
               if a != b]
    assert len(changed) == 5
    assert '"dropout": CPU_MODEL["dropout"],' in presets.read_text()
    assert '**CPU_TRAINING, "label_smoothing": 0.0,' in presets.read_text()
    copy = json.loads(book_copy.read_text())
    assert copy["chosen_settings"]["schedule"] == "linear"
    assert copy["runs"] == [{"name": "preset", "seed": 0, "steps": 5, "valid_loss": 2.0,
                             "val_beam4": {"bleu": 1.0}, "averages": {"0": {"bleu": 0.5}}}]
    assert copy["machine_before"] == {"cpu": "CPU", "torch_threads": 2,
                                      "matmul_1024_gflops": {"wall": 190.0}}


def test_recipe_apply_leaves_an_unchanged_preset_alone(campaign, tmp_path, monkeypatch):
    presets = tmp_path / "presets.py"
    presets.write_text(PRESETS.read_text())
    monkeypatch.setattr(campaign, "PRESETS", presets)
    result = tmp_path / "recipe_choice.json"
    result.write_text(json.dumps(choice_record(chosen_settings={})))
    campaign.cmd_recipe_apply(argparse.Namespace(result=result, book_copy=tmp_path / "c.json",
                                                 force=False))
    assert presets.read_text() == PRESETS.read_text()


@pytest.mark.parametrize("changes", [{"smoke": True}, {"seeds": [0]}])
def test_recipe_apply_refuses_a_smoke_or_short_result(campaign, tmp_path, monkeypatch,
                                                      changes):
    monkeypatch.setattr(campaign, "PRESETS", tmp_path / "never_written.py")
    result = tmp_path / "recipe_choice.json"
    result.write_text(json.dumps(choice_record(**changes)))
    with pytest.raises(SystemExit, match="smoke run or has fewer than three seeds"):
        campaign.cmd_recipe_apply(argparse.Namespace(result=result,
                                                     book_copy=tmp_path / "c.json",
                                                     force=False))


def test_averages_kept_beside_a_run_leave_its_training_unchanged(campaign, tmp_path,
                                                                 monkeypatch):
    """``train-with-averages`` on the fixture corpus: the trained weights are
    those of a plain ``train`` run, each average is a loadable checkpoint,
    and avg0.pt holds the trained weights."""
    import torch
    from test_cli import TINY

    from minitransformer import cli
    from minitransformer.training.checkpoint import build_model, load_checkpoint
    from minitransformer.training.recipe import load_run

    monkeypatch.setattr(cli, "fit", cli.fit)  # put back after the test
    flags = ["--max-steps", "6", *TINY, "--tokenizer", "words", "--no-bleu", "--ema", "0.9",
             "--seed", "3"]
    hooked, plain = tmp_path / "hooked", tmp_path / "plain"
    assert campaign.train_with_averages([0.5, 0.8], ["--out", str(hooked), *flags]) == 0
    info = json.loads((hooked / "averages.json").read_text())
    assert info["files"] == {"0": "avg0.pt", "0.5": "avg0.5.pt", "0.8": "avg0.8.pt",
                             "0.9": "last.pt"}
    assert info["updates"] == 6 and info["own_decay"] == 0.9
    files = campaign.average_files(hooked)
    assert list(files) == ["0", "0.5", "0.8", "0.9"]
    trained = load_checkpoint(hooked / "last.pt")["model_state"]
    as_trained = build_model(files["0"]).state_dict()
    assert all(torch.equal(as_trained[k], v) for k, v in trained.items())
    half = build_model(files["0.5"]).state_dict()
    assert not all(torch.equal(half[k], v) for k, v in trained.items())
    for file in files.values():  # what evaluate loads
        load_run(file, "cpu")

    monkeypatch.undo()  # the plain fit again
    assert cli.main(["train", "--out", str(plain), *flags]) == 0
    same = load_checkpoint(plain / "last.pt")["model_state"]
    assert all(torch.equal(same[k], v) for k, v in trained.items())


def test_a_step_budget_trains_in_float32_without_a_time_limit(campaign):
    args = argparse.Namespace(steps=1000, minutes=None)
    budget = campaign.budget_of(args)
    assert budget == {"steps": 1000, "amp": "off"}
    assert campaign.budget_text(budget) == "1000 float32 steps"
    flags = parse_args(["train", "--out", "x", *campaign.budget_flags(budget)])
    cfg = train_config_from_flags(flags)  # the real train parser and config
    assert cfg.max_steps == 1000 and cfg.amp == "off"
    assert cfg.max_minutes >= 1000 * 60  # no run of 1000 steps meets it first
    minutes = campaign.budget_of(argparse.Namespace(steps=None, minutes=10.0))
    assert minutes == {"minutes": 10.0}
    flags = parse_args(["train", "--out", "x", *campaign.budget_flags(minutes)])
    assert train_config_from_flags(flags).max_minutes == 10.0


def test_a_committed_record_resumes_a_run_whose_folder_is_gone(campaign, tmp_path):
    out, kept = tmp_path / "runs" / "preset_seed0", tmp_path / "kept"
    kept.mkdir()
    record = {"name": "preset", "seed": 0, "options": [], "budget": {"steps": 1000, "amp": "off"},
              "smoke": False, "averages_kept": [0.99], "val_beam4": {"bleu": 30.0},
              "averages": {"0": {"bleu": 29.0}}, "preset": campaign.preset_values()}
    (kept / "preset_seed0.json").write_text(json.dumps(record))
    steps = {"steps": 1000, "amp": "off"}
    got = campaign.finished_record(out, [], steps, False, (0.99,), True, kept)
    assert got == {**record, "_from": str(kept / "preset_seed0.json")}
    assert campaign.finished_record(out, [], steps, False, (0.99,), True) is None  # not looked
    assert campaign.finished_record(out, [], {"steps": 500, "amp": "off"}, False, (0.99,),
                                    True, kept) is None  # another budget
    assert campaign.finished_record(out, [], 10.0, False, (0.99,), True, kept) is None
    # a record of the time budget (no "budget" field, as choose's are) still matches minutes
    old = {**record, "minutes_budget": 10.0}
    del old["budget"]
    (kept / "preset_seed0.json").write_text(json.dumps(old))
    assert campaign.finished_record(out, [], 10.0, False, (0.99,), True, kept) is not None
    assert campaign.finished_record(out, [], steps, False, (0.99,), True, kept) is None


@pytest.mark.parametrize("argv, said", [
    (["recipe", "--steps", "100", "--minutes", "5"], "two budgets"),
    (["recipe", "--steps", "0"], "positive number of steps"),
])
def test_the_recipe_refuses_two_budgets_or_no_steps(campaign, monkeypatch, capsys, argv, said):
    monkeypatch.setattr(campaign.sys, "argv", ["campaign_translator.py", *argv])
    with pytest.raises(SystemExit):
        campaign.main()
    assert said in capsys.readouterr().err
