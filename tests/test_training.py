"""Tests of minitransformer.training, schedule, history and checkpoint.

References: F.cross_entropy for the loss, the paper's formula for the
schedule, an uninterrupted run for resuming, torch.load(weights_only=True)
for checkpoints.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import TokenBatcher, Vocab, make_batch, make_synthetic
from minitransformer.training import (
    TrainConfig,
    Trainer,
    evaluate_accuracy,
    evaluate_loss,
    fit,
    label_smoothed_cross_entropy,
    pick_device,
)
from minitransformer.training.checkpoint import build_model, load_checkpoint, save_checkpoint
from minitransformer.training.history import History
from minitransformer.training.schedule import learning_rate, paper_noam_lr

V = 14  # 4 specials + 10 symbols


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only cost


def tiny_model(dropout: float = 0.1, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(
        V, V, d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
        d_ff=64, dropout=dropout, max_len=32,
    ))


def batcher(n: int = 96, max_tokens: int = 160, seed: int = 0, task: str = "copy") -> TokenBatcher:
    examples = make_synthetic(task, n, 2, 8, num_symbols=10, seed=seed, split="train")
    return TokenBatcher(examples, max_tokens, seed=seed)


def quick(**kw) -> TrainConfig:
    base = dict(lr=3e-3, schedule="constant", warmup_steps=0, epochs=None, max_steps=8,
                device="cpu", amp="off")
    return TrainConfig(**{**base, **kw})


# --- loss ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_loss_matches_torch_cross_entropy(eps):
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    target = torch.randint(1, 7, (3, 5))
    target[0, 3:] = 0
    target[2, 1:] = 0
    ours = label_smoothed_cross_entropy(logits, target, smoothing=eps, pad_id=0)
    ref = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), ignore_index=0,
                          label_smoothing=eps)
    torch.testing.assert_close(ours.double(), ref, rtol=1e-6, atol=1e-6)


def test_loss_ignores_padding_and_gradients():
    logits = torch.randn(2, 4, 6, requires_grad=True)
    target = torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]])
    label_smoothed_cross_entropy(logits, target, 0.1, pad_id=0).backward()
    assert logits.grad[0, 2:].abs().max() == 0 and logits.grad[1, 1:].abs().max() == 0
    assert logits.grad[0, :2].abs().max() > 0
    all_pad = label_smoothed_cross_entropy(logits, torch.zeros(2, 4, dtype=torch.long), 0.1)
    assert all_pad.item() == 0.0


class FixedPredictions(nn.Module):
    """A "model" that predicts, at each target position, the token its
    batch's source holds there: its predictions are chosen by the test."""

    def __init__(self):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1))  # the device evaluate_accuracy reads

    def forward(self, src, tgt_in):
        return F.one_hot(src, V).float() + 0 * self.anchor  # (B, T, V)


def test_accuracy_counts_right_non_pad_tokens_across_batches():
    def batch(pred, target):
        target = torch.tensor(target)
        return (torch.tensor(pred), torch.zeros_like(target), target)  # (src, tgt_in, tgt_out)

    batches = [
        batch([[5, 6, 7, 2], [5, 5, 0, 0]], [[5, 6, 8, 2], [4, 5, 0, 0]]),  # 4 of 6 right
        batch([[9, 9, 9, 9]], [[9, 3, -100, 0]]),  # 1 of 2 (IGNORE_ID and pad not counted)
    ]
    model = FixedPredictions()
    model.train()
    assert evaluate_accuracy(model, batches) == pytest.approx(5 / 8)  # not (4/6 + 1/2) / 2
    assert model.training  # the mode is given back
    assert evaluate_accuracy(model, batches[:1]) == pytest.approx(4 / 6)
    assert evaluate_accuracy(model, [batch([[1, 1]], [[0, 0]])]) == 0.0  # nothing counted
    with pytest.raises(TypeError, match="pass \\[batch\\]"):
        evaluate_accuracy(model, make_batch([([1, 2], [2, 1])]))


def test_accuracy_of_a_trained_model_agrees_with_its_argmax():
    model = tiny_model(dropout=0.0)
    data = batcher(n=16)
    expected_right = expected_count = 0
    for b in data:
        with torch.no_grad():
            pred = model(b.src, b.tgt_in).argmax(-1)
        keep = b.tgt_out != 0
        expected_right += int(((pred == b.tgt_out) & keep).sum())
        expected_count += int(keep.sum())
    assert evaluate_accuracy(model, data) == pytest.approx(expected_right / expected_count)


def test_loss_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        label_smoothed_cross_entropy(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


# --- schedule -----------------------------------------------------------------------------------

@pytest.mark.parametrize("d_model,warmup", [(512, 4000), (256, 400)])
def test_noam_equals_papers_formula(d_model, warmup):
    peak = (d_model * warmup) ** -0.5
    for step in (1, 7, warmup - 1, warmup, warmup + 1, 10 * warmup, 123_457):
        assert math.isclose(learning_rate(step, peak, "noam", warmup),
                            paper_noam_lr(step, d_model, warmup), rel_tol=1e-12)


def test_constant_schedule_warms_up_then_stays():
    lrs = [learning_rate(s, 1e-3, "constant", 10) for s in range(1, 31)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[4] == pytest.approx(5e-4)
    assert all(x == pytest.approx(1e-3) for x in lrs[9:])
    assert learning_rate(5, 2e-3, "constant", 0) == 2e-3
    with pytest.raises(ValueError, match="schedule"):
        learning_rate(1, 1e-3, "cosine")
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="cosine")


def test_linear_schedule_warms_up_then_falls_to_zero_at_the_end_of_the_budget():
    assert learning_rate(5, 1e-3, "linear", 10, progress=0.01) == pytest.approx(5e-4)
    assert learning_rate(50, 1e-3, "linear", 10, progress=0.25) == pytest.approx(7.5e-4)
    assert learning_rate(50, 1e-3, "linear", 10, progress=0.5) == pytest.approx(5e-4)
    assert learning_rate(99, 1e-3, "linear", 10, progress=1.0) == 0.0
    assert learning_rate(1, 1e-3, "linear", 0, progress=0.0) == 1e-3
    for bad in (None, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="progress"):
            learning_rate(3, 1e-3, "linear", 10, progress=bad)


def test_fit_tells_the_linear_schedule_how_much_of_the_budget_is_spent(monkeypatch):
    import minitransformer.training.loop as training

    seen = []

    def spy(step, lr, schedule, warmup_steps, progress=None):
        seen.append((step, progress))
        return learning_rate(step, lr, schedule, warmup_steps, progress)

    monkeypatch.setattr(training, "learning_rate", spy)
    config = quick(lr=1e-3, schedule="linear", warmup_steps=0, max_steps=4)
    fit(tiny_model(), batcher(), config=config, progress=False)
    assert seen == [(1, 0.0), (2, 0.25), (3, 0.5), (4, 0.75)]


def test_budget_spent_is_the_largest_fraction_of_any_budget():
    from minitransformer.training.loop import _budget_spent, _State

    cfg = quick(max_steps=100, epochs=2, max_minutes=10)
    state = _State(step=10, epoch=1, batch_in_epoch=5)
    assert _budget_spent(cfg, state, 0.0, per_epoch=10) == pytest.approx(0.75)  # 1.5 of 2 epochs
    assert _budget_spent(cfg, state, 540.0, per_epoch=10) == pytest.approx(0.9)  # 9 of 10 min
    assert _budget_spent(cfg, state, 0.0, per_epoch=math.inf) == pytest.approx(0.1)  # 10 steps
    assert _budget_spent(cfg, state, 6000.0, per_epoch=10) == 1.0


def test_fit_uses_the_schedule():
    """Adam's first update moves every weight by exactly lr·sign(gradient)
    (m̂ = g, v̂ = g²), so the largest move is the step-1 learning rate."""
    model = tiny_model()
    before = [p.detach().clone() for p in model.parameters()]
    config = quick(lr=1e-2, schedule="noam", warmup_steps=4, max_steps=1, clip_norm=None)
    fit(model, batcher(), config=config, progress=False)
    moves = [(p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before)]
    assert max(moves) == pytest.approx(learning_rate(1, 1e-2, "noam", 4), rel=1e-3)
    assert learning_rate(1, 1e-2, "noam", 4) == pytest.approx(1e-2 / 4)


# --- fit ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_fit_learns_copy_task_and_evaluates():
    torch.manual_seed(0)
    train = batcher(n=400, max_tokens=400)
    valid = list(batcher(n=60, seed=1))
    model = tiny_model(dropout=0.0)
    before = evaluate_loss(model, valid)
    history = fit(model, train, valid, config=quick(max_steps=250), progress=False)
    assert history.valid_loss[-1] < 0.5 < before
    assert history.stop_reason == "max_steps"
    assert len(history.train_loss) == 250 and history.tokens_per_second > 0
    # evaluate_loss is the plain token-mean cross-entropy
    logits_sum, count = 0.0, 0
    with torch.no_grad():
        model.eval()
        for b in valid:
            logits = model(b.src, b.tgt_in)
            logits_sum += F.cross_entropy(logits.transpose(1, 2), b.tgt_out, ignore_index=0,
                                          reduction="sum").item()
            count += b.num_tgt_tokens
    assert evaluate_loss(model, valid) == pytest.approx(logits_sum / count, rel=1e-5)


def test_fit_is_quiet_without_progress(capsys):
    fit(tiny_model(), batcher(), list(batcher(n=20, seed=1)), config=quick(max_steps=3),
        progress=False)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_fit_shows_progress_bar(capsys):
    fit(tiny_model(), batcher(), config=quick(max_steps=3, log_every=1), progress=True)
    err = capsys.readouterr().err
    assert "tok/s" in err and "loss" in err and "3/3" in err


def test_seeded_runs_are_reproducible():
    runs = [fit(tiny_model(), batcher(), config=quick(), progress=False).train_loss
            for _ in range(2)]
    assert runs[0] == runs[1]
    other = fit(tiny_model(), batcher(), config=quick(seed=1), progress=False).train_loss
    assert other != runs[0]  # dropout masks differ


def test_stops_on_epochs_and_time_budget():
    train = batcher()
    h = fit(tiny_model(), train, config=quick(max_steps=None, epochs=2), progress=False)
    assert h.stop_reason == "epochs" and len(h.step) == 2 * len(train)
    h = fit(tiny_model(), train, config=quick(max_steps=None, epochs=None, max_minutes=0.5 / 60),
            progress=False)
    assert h.stop_reason == "max_minutes" and 0 < h.seconds[-1] < 5


def test_eval_every_and_callback():
    calls = []
    h = fit(tiny_model(), batcher(), list(batcher(n=20, seed=1)),
            config=quick(max_steps=7, eval_every=3), progress=False,
            callback=lambda hist: calls.append(hist.valid_step[-1]))
    assert h.valid_step == [3, 6, 7] and calls == [3, 6, 7]


class TinyGRU(nn.Module):
    """A minimal model with the seq2seq interface (not a Transformer)."""

    def __init__(self):
        super().__init__()
        self.config = type("C", (), {"pad_id": 0})()
        self.embed = nn.Embedding(V, 16)
        self.enc = nn.GRU(16, 16, batch_first=True)
        self.dec = nn.GRU(16, 16, batch_first=True)
        self.out = nn.Linear(16, V)

    def forward(self, src, tgt_in):
        _, h = self.enc(self.embed(src))
        y, _ = self.dec(self.embed(tgt_in), h)
        return self.out(y)


def test_fit_trains_any_seq2seq_model():
    model = TinyGRU()
    h = fit(model, batcher(n=200), config=quick(max_steps=60, lr=1e-2), progress=False)
    first, last = sum(h.train_loss[:5]) / 5, sum(h.train_loss[-5:]) / 5
    assert last < first - 0.3


def test_fit_rejects_bad_batches_and_config():
    with pytest.raises(TypeError, match=r"Batch \(src, tgt_in, tgt_out\).*LMBatch"):
        fit(tiny_model(), [torch.zeros(2, 3)], config=quick(max_steps=1), progress=False)
    with pytest.raises(TypeError, match="TrainConfig"):
        fit(tiny_model(), batcher(), config={"lr": 1}, progress=False)
    with pytest.raises(ValueError, match="at least one"):
        TrainConfig(epochs=None)


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else None
    if expected is None and torch.backends.mps.is_available():
        expected = "mps"
    assert pick_device().type == (expected or "cpu")


# --- history ------------------------------------------------------------------------------------

def test_history_round_trip_and_plot():
    h = History()
    for s in range(1, 6):
        h.add_step(s, torch.tensor(float(10 - s)), tokens=100, seconds=0.5 * s)
    h.add_valid(5, 1.0, 2.5)
    d = h.to_dict()
    assert d["train_loss"] == [9.0, 8.0, 7.0, 6.0, 5.0]
    assert History.from_dict(d).to_dict() == d
    assert h.tokens_per_second == pytest.approx(500 / 2.5)
    assert h.smoothed_train_loss(window=2) == [9.0, 8.5, 7.5, 6.5, 5.5]
    ax = h.plot(window=2)
    assert ax.get_xlabel() == "optimiser step"
    # History does not know whether the run smoothed its labels: the legend
    # must not say so (chapter 11 trains without smoothing).
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 2 and not any("smoothed" in t for t in labels)
    assert "2-step mean" in labels[0]
    import matplotlib.pyplot as plt

    plt.close("all")


# --- checkpoints and resuming -------------------------------------------------------------------

def test_checkpoint_holds_everything_and_loads_weights_only(tmp_path):
    vocab = Vocab.build([["ein", "hund"], ["ein", "mann"]])
    model = tiny_model()
    fit(model, batcher(), list(batcher(n=20, seed=1)),
        config=quick(max_steps=3, checkpoint_dir=str(tmp_path)), progress=False,
        vocabs={"src": vocab, "tgt": vocab})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt", "last.pt"]  # no temp files
    raw = torch.load(tmp_path / "last.pt", weights_only=True)
    assert raw["train_state"]["step"] == 3
    assert raw["train_config"]["max_steps"] == 3
    assert raw["model_config"] == model.config.to_dict()
    assert Vocab.from_dict(raw["vocabs"]["src"]).itos == vocab.itos
    assert set(raw["rng"]) >= {"torch", "python", "numpy"}
    assert raw["optimizer_state"]["state"]  # Adam moments
    rebuilt = build_model(tmp_path)
    model.eval()
    src, tgt = torch.randint(4, V, (2, 5)), torch.randint(4, V, (2, 4))
    torch.testing.assert_close(rebuilt(src, tgt), model(src, tgt), rtol=0, atol=0)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path)
    bad = tmp_path / "last.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(bad)
    path = save_checkpoint(tmp_path / "x.pt", tiny_model())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_resume_continues_exactly(tmp_path):
    """Stop after 5 steps (in the middle of the second epoch), resume from the
    checkpoint in a fresh model: the losses are those of an uninterrupted run."""
    train = batcher(n=60, max_tokens=120)  # a few batches per epoch, reshuffled each epoch
    n = len(train)
    total = n + n // 2 + 3
    whole = fit(tiny_model(), train, config=quick(max_steps=total), progress=False)
    d = tmp_path / "ck"
    first = fit(tiny_model(), train, config=quick(max_steps=n + 2, checkpoint_dir=str(d)),
                progress=False)
    assert first.train_loss == whole.train_loss[: n + 2]
    torch.manual_seed(123)  # the resumed run must not depend on the caller's RNG
    resumed_model = tiny_model(seed=7)  # different initial weights: all must come from the file
    resumed = fit(resumed_model, train,
                  config=quick(max_steps=total, checkpoint_dir=str(d), resume=True),
                  progress=False)
    assert resumed.step == list(range(1, total + 1))
    assert resumed.train_loss == whole.train_loss
    # the training clock continues where the first run stopped: cumulative
    # seconds never go back, so throughput covers the whole run
    k = len(first.seconds)
    assert resumed.seconds[:k] == first.seconds
    assert all(b > a for a, b in zip(resumed.seconds, resumed.seconds[1:]))
    assert resumed.tokens_per_second == pytest.approx(
        sum(resumed.tokens) / resumed.seconds[-1])


def test_bf16_autocast_trains_in_float32_weights():
    model = tiny_model()
    h = fit(model, batcher(), list(batcher(n=20, seed=1)), config=quick(max_steps=3, amp="bf16"),
            progress=False)
    assert all(math.isfinite(x) for x in h.train_loss + h.valid_loss)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    with pytest.raises(ValueError, match="amp"):
        TrainConfig(amp="fp16")


def test_precision_says_which_path_runs(monkeypatch):
    from minitransformer.training import device, loop, native_bf16, precision

    cpu = torch.device("cpu")
    assert precision(cpu, "off") == (False, "float32 (asked for)")
    assert precision(cpu, "bf16")[0]
    assert not precision(cpu, "auto")[0]  # auto: CUDA GPUs only
    monkeypatch.setattr(device, "native_bf16", lambda device: "a CPU with AVX512_BF16")
    # native bf16 hardware is used only where bf16 measures faster (issue 28:
    # a Xeon with AVX512_BF16 and no AMX ran bf16 at 0.69x float32)
    monkeypatch.setattr(device, "bf16_matmul_speedup", lambda device: 1.3)
    on, why = precision(cpu, "native")
    assert on and why.startswith("bf16 autocast (a CPU with AVX512_BF16;") and "1.30x" in why
    monkeypatch.setattr(device, "bf16_matmul_speedup", lambda device: 0.69)
    on, why = precision(cpu, "native")
    assert not on and why.startswith("float32 (a CPU with AVX512_BF16, but") and "0.69x" in why
    assert precision(cpu, "bf16")[0]  # asked for: no measurement overrules it
    assert not precision(cpu, "auto")[0]
    monkeypatch.setattr(device, "native_bf16", lambda device: None)
    assert precision(cpu, "native") == (False, "float32 (no native bf16 on this cpu)")
    monkeypatch.undo()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if "avx512_bf16" in flags or "amx_tile" in flags:
        assert native_bf16(cpu) is not None
    elif flags:
        assert native_bf16(cpu) is None
    trainer = loop.Trainer(tiny_model(), quick(max_steps=1, amp="off"))
    assert trainer.precision == "float32 (asked for)"


def test_bf16_speedup_is_measured_once_per_device_type(monkeypatch):
    from minitransformer.training import device

    monkeypatch.setattr(device, "_speedups", {})
    calls = []
    real = torch.Tensor.__matmul__
    monkeypatch.setattr(torch.Tensor, "__matmul__",
                        lambda a, b: calls.append(a.shape) or real(a, b))
    first = device.bf16_matmul_speedup(torch.device("cpu"), size=64)
    assert math.isfinite(first) and first > 0
    assert len(calls) == 20  # three warm-ups, then seven of each precision
    assert device.bf16_matmul_speedup(torch.device("cpu"), size=64) == first
    assert len(calls) == 20  # remembered, not measured again


def test_bf16_speedup_leaves_threads_and_random_state_alone(monkeypatch):
    from minitransformer.training import device

    monkeypatch.setattr(device, "_speedups", {})
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    device.bf16_matmul_speedup(torch.device("cpu"), size=64)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_checkpoint_of_another_format_is_refused_in_one_line(tmp_path):
    from minitransformer.training.checkpoint import CHECKPOINT_FORMAT

    path = save_checkpoint(tmp_path / "new.pt", tiny_model())
    ckpt = torch.load(path, weights_only=True)
    ckpt["format"] = CHECKPOINT_FORMAT + 1
    torch.save(ckpt, path)
    with pytest.raises(ValueError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert f"format {CHECKPOINT_FORMAT + 1}" in message and f"{CHECKPOINT_FORMAT} (" in message
    with pytest.raises(ValueError, match=f"format {CHECKPOINT_FORMAT + 1}"):
        build_model(ckpt)  # a dict that did not come through load_checkpoint


def test_a_format_1_checkpoint_is_read_as_the_current_format(tmp_path):
    """Format 1 stored a run's average as model_state and the trained weights
    in train_state["ema"]; written here by hand from a current checkpoint."""
    d = tmp_path / "run"
    fit(tiny_model(), batcher(), config=quick(max_steps=3, ema_decay=0.9, checkpoint_dir=str(d)),
        progress=False)
    new = load_checkpoint(d / "last.pt")
    averaged = new["average"]["averaged"]
    old = {**new, "format": 1, "model_state": {**new["model_state"], **averaged}}
    del old["average"]
    old["train_state"] = {**new["train_state"], "ema": {
        "decay": 0.9, "num_updates": 3,
        "training_params": {n: new["model_state"][n] for n in averaged}}}
    torch.save(old, tmp_path / "old.pt")
    read = load_checkpoint(tmp_path / "old.pt")
    assert read["format"] == new["format"] and "ema" not in read["train_state"]
    assert read["average"]["num_updates"] == 3 and read["average"]["decay"] == 0.9
    for name, tensor in new["model_state"].items():
        torch.testing.assert_close(read["model_state"][name], tensor, rtol=0, atol=0)
    for name, tensor in averaged.items():
        torch.testing.assert_close(read["average"]["averaged"][name], tensor, rtol=0, atol=0)


# --- on_step and the Trainer --------------------------------------------------------------------

def test_on_step_reports_every_step():
    reports = []
    model = tiny_model()
    config = quick(lr=1e-2, schedule="noam", warmup_steps=3, max_steps=5)
    h = fit(model, batcher(), config=config, progress=False, on_step=reports.append)
    assert [r.step for r in reports] == h.step == [1, 2, 3, 4, 5]
    assert [float(r.loss) for r in reports] == h.train_loss
    assert [r.tokens for r in reports] == h.tokens  # one process: its batch is the global one
    assert [r.lr for r in reports] == [learning_rate(s, 1e-2, "noam", 3) for s in range(1, 6)]
    assert all(r.model is model and r.epoch == 0 and r.seconds > 0 for r in reports)


def test_trainer_steps_by_hand_equal_fit():
    batches = list(batcher())[:4]
    whole = fit(tiny_model(), batches, config=quick(max_steps=4), progress=False)
    trainer = Trainer(tiny_model(), quick(max_steps=4))
    losses = [float(trainer.step(b).loss) for b in batches]
    assert losses == whole.train_loss and trainer.history.step == [1, 2, 3, 4]
