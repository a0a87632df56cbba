"""Tests of minitransformer.training.averaging and of fit(ema_decay=...).

References: the closed form of an average of a constant, the update rule
applied by hand to the weights a run without averaging goes through, and an
uninterrupted run for resuming.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import TokenBatcher, make_synthetic
from minitransformer.training import TrainConfig, fit
from minitransformer.training.averaging import ExponentialMovingAverage
from minitransformer.training.checkpoint import build_model, load_checkpoint

V = 14


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only cost


def tiny_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(
        V, V, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
        d_ff=32, dropout=0.1, max_len=32,
    ))


def batches() -> TokenBatcher:
    examples = make_synthetic("copy", 60, 2, 8, num_symbols=10, seed=0, split="train")
    return TokenBatcher(examples, 120, seed=0)


def quick(**kw) -> TrainConfig:
    base = dict(lr=3e-3, schedule="constant", warmup_steps=0, epochs=None, max_steps=6,
                device="cpu", amp="off")
    return TrainConfig(**{**base, **kw})


def params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_average_is_the_decay_weighted_mean_of_the_weights_seen():
    # after n updates: Σ decay^(n−i)·θ_i / Σ decay^(n−i); the initial weights count for nothing
    layer = nn.Linear(3, 2)
    ema = ExponentialMovingAverage(layer, decay=0.9)
    values = torch.randn(25, 2, 3)
    for v in values:
        with torch.no_grad():
            layer.weight.copy_(v)
        ema.update(layer)
    w = 0.9 ** torch.arange(24, -1, -1, dtype=torch.float64)
    expected = (w[:, None, None] * values.double()).sum(0) / w.sum()
    torch.testing.assert_close(ema.averaged["weight"].double(), expected, rtol=1e-5, atol=1e-6)
    assert ema.num_updates == 25
    assert ema.current_decay() == pytest.approx(0.9, abs=0.01) and ema.current_decay() < 0.9


def test_swapped_in_restores_the_models_own_weights_even_after_an_error():
    layer = nn.Linear(3, 2)
    ema = ExponentialMovingAverage(layer, decay=0.5)
    with torch.no_grad():
        layer.weight.add_(1.0)
    own = params(layer)
    ema.update(layer)
    with pytest.raises(RuntimeError, match="inside"):
        with ema.swapped_in(layer) as saved:
            torch.testing.assert_close(layer.weight, ema.averaged["weight"])
            torch.testing.assert_close(saved["weight"], own["weight"])
            raise RuntimeError("inside")
    torch.testing.assert_close(layer.weight, own["weight"], rtol=0, atol=0)


def test_state_dict_round_trip_and_errors():
    layer = nn.Linear(3, 2)
    ema = ExponentialMovingAverage(layer, decay=0.8)
    ema.update(layer)
    other = ExponentialMovingAverage(nn.Linear(3, 2), decay=0.5)
    other.load_state_dict(ema.state_dict())
    assert other.decay == 0.8 and other.num_updates == 1
    torch.testing.assert_close(other.averaged["bias"], ema.averaged["bias"])
    with pytest.raises(ValueError, match="different parameters"):
        ExponentialMovingAverage(nn.Linear(3, 2, bias=False), 0.5).load_state_dict(ema.state_dict())
    with pytest.raises(ValueError, match="not those"):
        ema.update(nn.Linear(3, 2, bias=False))
    for bad in (0, 1, 1.5, -0.1, True, "0.9"):
        with pytest.raises(ValueError, match="decay must be in"):
            ExponentialMovingAverage(layer, bad)
    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(ema_decay=1.0)


def test_fit_keeps_the_average_of_the_weights_it_went_through(tmp_path):
    # A run without averaging, stopped after every step, gives the trajectory
    # θ_1..θ_n (averaging never changes training); apply the update rule to it.
    trajectory = []
    model = tiny_model()
    plain = fit(model, batches(), list(batches())[:1], quick(eval_every=1), progress=False,
                callback=lambda h: trajectory.append(params(model)))
    decay, n = 0.7, len(trajectory)
    weights = [decay ** (n - 1 - i) for i in range(n)]
    expected = {name: sum(w * theta[name] for w, theta in zip(weights, trajectory)) / sum(weights)
                for name in trajectory[0]}

    averaged = tiny_model()
    run = fit(averaged, batches(), list(batches())[:1],
              quick(ema_decay=decay, checkpoint_dir=str(tmp_path)), progress=False)
    assert run.train_loss == plain.train_loss  # same training
    for n, p in averaged.named_parameters():  # the model ends with the average
        torch.testing.assert_close(p.detach(), expected[n], rtol=1e-5, atol=1e-6)
    ckpt = load_checkpoint(tmp_path / "last.pt")
    for n in expected:  # the checkpoint holds the trained weights and the average's state
        torch.testing.assert_close(ckpt["model_state"][n], trajectory[-1][n], rtol=0, atol=0)
        torch.testing.assert_close(ckpt["average"]["averaged"][n], expected[n], rtol=1e-5,
                                   atol=1e-6)
    assert ckpt["average"]["num_updates"] == 6 and ckpt["average"]["decay"] == decay
    rebuilt = dict(build_model(ckpt).named_parameters())  # build_model loads the average
    as_trained = dict(build_model(ckpt, average=False).named_parameters())
    for n in expected:
        torch.testing.assert_close(rebuilt[n], expected[n], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(as_trained[n], trajectory[-1][n], rtol=0, atol=0)


def test_resume_continues_the_average_exactly(tmp_path):
    whole_model = tiny_model()
    whole = fit(whole_model, batches(), config=quick(max_steps=7, ema_decay=0.8), progress=False)
    d = str(tmp_path / "ck")
    fit(tiny_model(), batches(), config=quick(max_steps=4, ema_decay=0.8, checkpoint_dir=d),
        progress=False)
    resumed_model = tiny_model(seed=3)
    resumed = fit(resumed_model, batches(),
                  config=quick(max_steps=7, ema_decay=0.8, checkpoint_dir=d, resume=True),
                  progress=False)
    assert resumed.train_loss == whole.train_loss  # trained from the trained weights
    for (n, a), b in zip(whole_model.named_parameters(), resumed_model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=n)
