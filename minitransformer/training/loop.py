"""Training a sequence-to-sequence model: loss, optimiser, schedule, loop.

Follows Vaswani et al. (2017), section 5: Adam with β = (0.9, 0.98),
ε = 1e-9, the warm-up learning-rate schedule (:mod:`minitransformer.training.schedule`)
and label smoothing ε_ls = 0.1 (Szegedy et al. 2016), with gradient clipping
added for robustness. :func:`fit` trains any model with the package's
seq2seq interface, ``model(src (B, S), tgt_in (B, T)) -> logits (B, T, V)``,
on any re-iterable of batches (objects with ``src``, ``tgt_in``, ``tgt_out``,
e.g. :class:`minitransformer.data.Batch`). It runs unchanged on one device
or under ``torchrun`` (:mod:`minitransformer.training.distributed`), resumes exactly
from its checkpoints (:mod:`minitransformer.training.checkpoint`) and keeps a
:class:`History` for plots.

Shape letters: ``B`` batch, ``S`` source length, ``T`` target length,
``V`` target vocabulary size.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from . import distributed as dist_utils
from .averaging import ExponentialMovingAverage
from .checkpoint import load_checkpoint, save_checkpoint, set_rng_state
from .history import History
from .schedule import SCHEDULES, learning_rate

__all__ = [
    "TrainConfig",
    "History",
    "label_smoothed_cross_entropy",
    "evaluate_loss",
    "pick_device",
    "make_optimizer",
    "fit",
]


@dataclass
class TrainConfig:
    """Settings of :func:`fit` (defaults: the paper's optimiser, a small warm-up)."""

    lr: float = 1e-3  # peak learning rate (after warm-up)
    # "noam" (warm-up then 1/√step), "constant" (warm-up then flat) or "linear"
    # (warm-up then a straight line to 0 at the end of the budget; see schedule.py)
    schedule: str = "noam"
    warmup_steps: int = 1000  # the paper: 4000 (with 25,000-token batches)
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    # keep a moving average of the weights (minitransformer.training.averaging) with this
    # decay; validation, checkpoints' model_state and the model after fit use it
    ema_decay: float | None = None
    clip_norm: float | None = 1.0  # max global gradient norm; None = no clipping
    epochs: int | None = 10  # stop after this many passes over the data (None = no limit)
    max_steps: int | None = None  # ... or this many optimiser steps in total
    max_minutes: float | None = None  # ... or this much wall time in this call
    eval_every: int | None = None  # validate every N steps; None = after each epoch
    seed: int | None = 0  # seeds torch/random at the start (dropout); None = leave as is
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU) or a torch device string
    amp: str = "auto"  # "bf16", "off", or "auto" (bf16 on CUDA GPUs that support it)
    checkpoint_dir: str | None = None  # write last.pt (and best.pt) here at each evaluation
    resume: bool = False  # continue from checkpoint_dir/last.pt if it exists
    log_every: int = 10  # steps between progress-bar updates and history flushes
    pad_id: int | None = None  # None: model.config.pad_id

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"TrainConfig: schedule must be one of {SCHEDULES}, got {self.schedule!r}"
            )
        if self.amp not in ("auto", "bf16", "off"):
            raise ValueError(f"TrainConfig: amp must be 'auto', 'bf16' or 'off', got {self.amp!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"TrainConfig: label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ValueError(
                f"TrainConfig: ema_decay must be in (0, 1) or None, got {self.ema_decay}"
            )
        if self.epochs is None and self.max_steps is None and self.max_minutes is None:
            raise ValueError("TrainConfig: set at least one of epochs, max_steps, max_minutes")
        if self.resume and not self.checkpoint_dir:
            raise ValueError("TrainConfig: resume=True needs a checkpoint_dir")
        self.betas = tuple(self.betas)

    def to_dict(self) -> dict:
        """Plain dict; ``TrainConfig(**d)`` rebuilds it."""
        return asdict(self)


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float = 0.1, pad_id: int = 0
) -> Tensor:
    """Mean label-smoothed cross-entropy over the non-pad target tokens.

    The smoothed target puts ``1 - ε + ε/V`` on the true token and ``ε/V`` on
    every other one (the convention of ``F.cross_entropy(label_smoothing=ε)``),
    so the loss is ``(1 - ε)·(−log p_true) + ε·mean_v(−log p_v)``.

    Args:
        logits: ``(B, T, V)`` unnormalised scores.
        target: ``(B, T)`` token ids; positions equal to ``pad_id`` count for nothing.
        smoothing: ε in [0, 1).
        pad_id: the padding id.

    Returns: a scalar tensor (0 if there is no non-pad token).
    """
    total, count = _loss_sum(logits, target, smoothing, pad_id)
    return total / count.clamp(min=1)


def _loss_sum(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """``(sum of the smoothed loss over non-pad tokens, number of them)``."""
    if logits.dim() != 3 or target.shape != logits.shape[:2]:
        raise ValueError(
            f"label_smoothed_cross_entropy: expected logits (B, T, V) and target (B, T), "
            f"got {tuple(logits.shape)} and {tuple(target.shape)}"
        )
    logp = logits.float().log_softmax(dim=-1)  # (B, T, V)
    keep = target != pad_id  # (B, T)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    loss = nll if smoothing == 0 else (1 - smoothing) * nll - smoothing * logp.mean(dim=-1)
    return loss.masked_fill(~keep, 0.0).sum(), keep.sum()


def pick_device(preference: str = "auto") -> torch.device:
    """CUDA if available, then Apple's MPS, then the CPU (or ``preference`` if not "auto").

    Raises ``RuntimeError`` (one line) for a device this machine does not have
    (``"cuda"`` without a GPU, ``"cuda:3"`` with one) or cannot compute on
    (``"meta"``), so the mistake shows before anything is loaded or written.
    """
    if preference != "auto":
        device = torch.device(preference)  # RuntimeError for a malformed string
        if device.type == "meta":
            raise RuntimeError("the 'meta' device holds no data; use 'cpu', 'cuda' or 'auto'")
        try:
            torch.empty(1, device=device)
        except Exception as err:  # not compiled with it, no such GPU, no driver
            reason = str(err).strip().split(". ")[0][:120] or type(err).__name__
            raise RuntimeError(f"device {preference!r} is not available here ({reason})") from None
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _autocast(device: torch.device, amp: str):
    """bf16 autocast context for ``amp`` ("auto": on CUDA with bf16 support only)."""
    use = amp == "bf16" or (
        amp == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    if not use:
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Adam:
    """Adam with the config's β, ε and weight decay. It uses PyTorch's fused
    implementation (one kernel for all parameters), which on a CPU is about
    five times faster than the default per-parameter loop and computes the
    same update up to rounding."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):  # a device or dtype without a fused kernel
        return torch.optim.Adam(params, **kwargs)


def _parts(batch: Any) -> tuple[Tensor, Tensor, Tensor]:
    if isinstance(batch, (tuple, list)) and len(batch) == 3:
        return tuple(batch)
    try:
        return batch.src, batch.tgt_in, batch.tgt_out
    except AttributeError:
        raise TypeError(
            "fit: each batch must have src, tgt_in and tgt_out (a minitransformer.data.Batch) "
            f"or be a (src, tgt_in, tgt_out) tuple, got {type(batch).__name__}"
        ) from None


def _pad_id(model: nn.Module, pad_id: int | None) -> int:
    if pad_id is not None:
        return pad_id
    return getattr(getattr(model, "config", None), "pad_id", 0)


@torch.no_grad()
def evaluate_loss(
    model: nn.Module,
    batches: Iterable,
    pad_id: int | None = None,
    device: torch.device | str | None = None,
    amp: str = "off",
) -> float:
    """Mean cross-entropy (no label smoothing, nats per target token) over
    ``batches``; ``exp`` of it is the perplexity. Under ``torchrun`` each
    process evaluates its share and the sums are combined."""
    inner = getattr(model, "module", model)
    pad = _pad_id(inner, pad_id)
    device = torch.device(device) if device is not None else next(inner.parameters()).device
    cast = _autocast(device, amp)
    was_training = inner.training
    inner.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    rank, world = dist_utils.rank_and_world()
    for i, batch in enumerate(batches):
        if i % world != rank:
            continue
        src, tgt_in, tgt_out = (t.to(device) for t in _parts(batch))
        with cast():
            logits = inner(src, tgt_in)
        loss_sum, count = _loss_sum(logits, tgt_out, 0.0, pad)
        total += torch.stack([loss_sum.double(), count.double()])
    dist_utils.all_reduce_sum(total)
    inner.train(was_training)
    return float(total[0] / total[1].clamp(min=1))


@dataclass
class _State:
    """The loop's counters (stored in checkpoints)."""

    step: int = 0  # optimiser steps taken
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # global batches of this epoch already used
    best_valid: float = math.inf


def _elapsed(start: float, device: torch.device) -> float:
    """Seconds since ``start``; under DDP the largest over all processes, so
    that every process takes the same time-based decisions (learning rate,
    when to stop) and none waits forever for the others."""
    seconds = time.perf_counter() - start
    if dist_utils.is_on():
        t = torch.tensor([seconds], dtype=torch.float64, device=device)
        seconds = float(dist_utils.all_reduce_max(t).item())
    return seconds


def _stop_reason(cfg: TrainConfig, state: _State, elapsed: float) -> str | None:
    if cfg.max_steps is not None and state.step >= cfg.max_steps:
        return "max_steps"
    if cfg.epochs is not None and state.epoch >= cfg.epochs:
        return "epochs"
    if cfg.max_minutes is not None and elapsed >= 60 * cfg.max_minutes:
        return "max_minutes"
    return None


def _budget_spent(cfg: TrainConfig, state: _State, elapsed: float, per_epoch: float) -> float:
    """Fraction of the training budget already used, in [0, 1]: the largest of
    steps / max_steps, epochs / epochs and minutes / max_minutes (an epoch
    budget counts only when the number of batches per epoch is known)."""
    spent = 0.0
    if cfg.max_steps is not None:
        spent = max(spent, state.step / cfg.max_steps)
    if cfg.epochs is not None and per_epoch != math.inf:
        spent = max(spent, (state.epoch + state.batch_in_epoch / per_epoch) / cfg.epochs)
    if cfg.max_minutes is not None:
        spent = max(spent, elapsed / (60 * cfg.max_minutes))
    return min(1.0, spent)


def fit(
    model: nn.Module,
    train_batches: Iterable,
    valid_batches: Iterable | None = None,
    config: TrainConfig | None = None,
    progress: bool = True,
    *,
    vocabs: dict[str, Any] | None = None,
    callback: Callable[[History], None] | None = None,
) -> History:
    """Train ``model`` in place and return its :class:`History`.

    Args:
        model: any seq2seq model, ``model(src, tgt_in) -> logits (B, T, V)``.
        train_batches: a re-iterable of batches (a list, or a ``TokenBatcher``,
            whose ``set_epoch`` is called so every epoch is reshuffled
            reproducibly). Each batch is one optimiser step; under ``torchrun``
            with ``W`` processes, each step uses ``W`` consecutive batches, one
            per process.
        valid_batches: batches for :func:`evaluate_loss`, run every
            ``config.eval_every`` steps (or after each epoch) and at the end.
        config: a :class:`TrainConfig`.
        progress: show a tqdm bar (loss, tokens/s, learning rate, time left).
        vocabs: stored in checkpoints, e.g. ``{"src": src_vocab, "tgt": tgt_vocab}``.
        callback: called with the history after each evaluation (e.g. a live plot).

    Training stops at whichever of ``epochs``, ``max_steps`` or ``max_minutes``
    comes first; then it evaluates and (if ``checkpoint_dir``) saves.

    With ``config.ema_decay`` an
    :class:`~minitransformer.training.averaging.ExponentialMovingAverage`
    of the weights is updated after every step; validation losses are those
    of the averaged weights, checkpoints store them as ``model_state`` (the
    weights being trained go to ``train_state["ema"]`` for resuming), and
    ``model`` holds them when ``fit`` returns.
    """
    cfg = config if config is not None else TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"fit: config must be a TrainConfig, got {type(cfg).__name__}")
    start = time.perf_counter()
    device = dist_utils.device_for_rank(pick_device(cfg.device))  # starts DDP under torchrun
    rank, world = dist_utils.rank_and_world()
    inner = model.to(device)
    pad = _pad_id(inner, cfg.pad_id)
    train_model = dist_utils.wrap(inner, device)
    optimizer = make_optimizer(inner, cfg)
    cast = _autocast(device, cfg.amp)
    history, state = History(), _State()
    ckpt_dir = Path(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    if cfg.seed is not None:
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
    if cfg.resume and ckpt_dir is not None and (ckpt_dir / "last.pt").is_file():
        ckpt = load_checkpoint(ckpt_dir / "last.pt", map_location=device)
        inner.load_state_dict(ckpt["model_state"])
        optimizer.load_state_dict(ckpt["optimizer_state"])
        ts = ckpt["train_state"]
        state = _State(**{k: ts[k] for k in ("step", "epoch", "batch_in_epoch", "best_valid")})
        history = History.from_dict(ts["history"])
        set_rng_state(ckpt["rng"])
        ema = _resume_average(inner, ts.get("ema"), cfg.ema_decay)
    else:
        ema = ExponentialMovingAverage(inner, cfg.ema_decay) if cfg.ema_decay else None

    def save(name: str, training_params: dict | None = None) -> None:
        if ckpt_dir is None or rank != 0:
            return
        train_state = {**asdict(state), "history": history.to_dict()}
        if ema is not None:  # inner holds the average here; keep the trained weights too
            train_state["ema"] = {
                "decay": ema.decay, "num_updates": ema.num_updates,
                "training_params": training_params,
            }
        save_checkpoint(
            ckpt_dir / name, inner, optimizer, train_state=train_state,
            train_config=cfg, vocabs=vocabs,
        )

    validated_at = [-1]

    def validate() -> None:
        validated_at[0] = state.step
        history.flush()
        averaged = ema.swapped_in(inner) if ema is not None else nullcontext()
        with averaged as training_params:
            if valid_batches is not None:
                loss = evaluate_loss(inner, valid_batches, pad, device, cfg.amp)
                history.add_valid(state.step, state.epoch + state.batch_in_epoch / n_or_inf, loss)
                if loss < state.best_valid:
                    state.best_valid = loss
                    save("best.pt", training_params)
            save("last.pt", training_params)
        dist_utils.barrier()
        if callback is not None and rank == 0:
            callback(history)

    n_batches = len(train_batches) if hasattr(train_batches, "__len__") else None
    n_or_inf = (n_batches // world) if n_batches else math.inf
    bar = _progress_bar(cfg, n_or_inf, state.step, enabled=progress and rank == 0)
    inner.train()
    train_seconds = 0.0
    elapsed = _elapsed(start, device)  # one clock reading per step, shared by all processes
    reason = _stop_reason(cfg, state, elapsed)
    while reason is None:
        if hasattr(train_batches, "set_epoch"):
            train_batches.set_epoch(state.epoch)
        group: list = []
        for index, batch in enumerate(train_batches):
            if index < state.batch_in_epoch * world:
                continue  # resuming in the middle of an epoch
            group.append(batch)
            if len(group) < world:
                continue
            mine, group = group[rank], []
            t0 = time.perf_counter()
            spent = _budget_spent(cfg, state, elapsed, n_or_inf)
            loss, tokens = _train_step(
                train_model, optimizer, mine, cfg, state.step + 1, pad, device, cast, spent
            )
            if ema is not None:
                ema.update(inner)
            state.step += 1
            state.batch_in_epoch += 1
            train_seconds += time.perf_counter() - t0
            history.add_step(state.step, loss, tokens * world, train_seconds)
            if state.step % cfg.log_every == 0:
                history.flush()
                _update_bar(bar, history, cfg, start)
            if cfg.eval_every and state.step % cfg.eval_every == 0:
                validate()
            elapsed = _elapsed(start, device)
            reason = _stop_reason(cfg, state, elapsed)
            if reason is not None:
                break
        else:
            state.epoch += 1
            state.batch_in_epoch = 0
            if not cfg.eval_every:
                validate()
            elapsed = _elapsed(start, device)
            reason = _stop_reason(cfg, state, elapsed)
            continue
    if validated_at[0] != state.step:
        validate()
    if ema is not None:
        ema.copy_to(inner)
    history.stop_reason = reason
    _update_bar(bar, history, cfg, start)
    if bar is not None:
        bar.close()
    return history


def _resume_average(
    model: nn.Module, stored: dict | None, decay: float | None
) -> ExponentialMovingAverage | None:
    """After ``model`` was loaded from a checkpoint's ``model_state``: if the
    run kept an average (``stored``, from ``train_state["ema"]``), that state
    *is* the average, so the average to continue starts from it, and the
    trained weights go back into ``model``. Returns the average (None without
    ``decay``)."""
    ema = ExponentialMovingAverage(model, decay) if decay else None
    if stored is not None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(stored["training_params"][name])
        if ema is not None:
            ema.num_updates = stored["num_updates"]
    return ema


def _train_step(
    model, optimizer, batch, cfg, step, pad, device, cast, spent=0.0
) -> tuple[Tensor, int]:
    """One optimiser step; returns (detached loss, source + target tokens of this batch).

    ``spent`` is the fraction of the budget used before this step (for the
    ``"linear"`` schedule)."""
    src, tgt_in, tgt_out = _parts(batch)
    src, tgt_in, tgt_out = (t.to(device, non_blocking=True) for t in (src, tgt_in, tgt_out))
    lr = learning_rate(step, cfg.lr, cfg.schedule, cfg.warmup_steps, spent)
    for group in optimizer.param_groups:
        group["lr"] = lr
    with cast():
        logits = model(src, tgt_in)  # (B, T, V)
    loss_sum, count = _loss_sum(logits, tgt_out, cfg.label_smoothing, pad)
    # Mean over the non-pad tokens of the *global* batch: each process divides
    # by the total count; DDP then averages (÷ world), so multiply back.
    total = dist_utils.all_reduce_sum(count.detach().clone()) if dist_utils.is_on() else count
    _, world = dist_utils.rank_and_world()
    loss = loss_sum * world / total.clamp(min=1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.clip_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    optimizer.step()
    tokens = int(count) + int((src != pad).sum())
    return (loss_sum / count.clamp(min=1)).detach(), tokens


def _progress_bar(cfg: TrainConfig, per_epoch: float, initial: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    total = cfg.max_steps
    if cfg.epochs is not None and per_epoch != math.inf:
        total = min(total or math.inf, cfg.epochs * int(per_epoch))
    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, mininterval=1.0)


def _update_bar(bar, history: History, cfg: TrainConfig, start: float) -> None:
    if bar is None or not history.step:
        return
    bar.update(history.step[-1] - bar.n)
    post = {"loss": f"{history.train_loss[-1]:.3f}", "tok/s": f"{history.recent_tps():,.0f}"}
    if history.valid_loss:
        post["valid"] = f"{history.valid_loss[-1]:.3f}"
    if cfg.max_minutes is not None:
        left = max(0.0, 60 * cfg.max_minutes - (time.perf_counter() - start))
        post["left"] = f"{left / 60:.1f} min"
    bar.set_postfix(post, refresh=False)
