"""The training loop: :func:`fit` and the :class:`Trainer` behind it.

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
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from . import distributed as dist_utils
from .averaging import ExponentialMovingAverage
from .checkpoint import load_checkpoint, save_checkpoint, set_rng_state
from .config import TrainConfig
from .device import autocast_for, pick_device, precision
from .history import History
from .loss import batch_parts, evaluate_loss, input_tokens, loss_sum, pad_id_of
from .resume_checks import IMPLEMENTATION_FLAGS, ResumeMismatchError, check_resume
from .schedule import learning_rate

__all__ = [
    "make_optimizer",
    "StepReport",
    "Trainer",
    "TrainingDivergedError",
    "fit",
]


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite: training stopped before saving the
    broken weights, so the last checkpoint is the last good one."""


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Adam:
    """Adam with the config's β, ε and weight decay. It uses PyTorch's fused
    implementation (one kernel for all parameters), which on a CPU is much
    faster than the default per-parameter loop (``benchmarks/README.md``)
    and computes the same update up to rounding."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):  # a device or dtype without a fused kernel
        return torch.optim.Adam(params, **kwargs)


@dataclass
class _State:
    """The loop's counters (stored in checkpoints)."""

    step: int = 0  # optimiser steps taken
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # global batches of this epoch already used
    best_valid: float = math.inf


@dataclass(frozen=True)
class StepReport:
    """What one optimiser step did: passed to ``fit``'s ``on_step`` and
    returned by :meth:`Trainer.step`.

    Attributes:
        step: optimiser steps taken so far (1 after the first).
        epoch: the current epoch, counted from 0.
        loss: the label-smoothed loss of this process's batch, a detached
            scalar tensor (``float(loss)`` waits for the device).
        tokens: non-pad source + target tokens of this process's batch.
        lr: the learning rate of this step.
        seconds: wall time of the step.
        model: the model being trained, unwrapped from DDP; it holds the
            weights as trained (not their average).
    """

    step: int
    epoch: int
    loss: Tensor
    tokens: int
    lr: float
    seconds: float
    model: nn.Module


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


def _own_batches(batches: Iterable, skip: int, rank: int, world: int) -> Iterator:
    """This process's batch of each global step of one pass over ``batches``.

    Global batches come in groups of ``world`` consecutive batches, one per
    process (``rank`` takes the ``rank``-th); the first ``skip`` groups (used
    before a resume) are passed over, and an incomplete last group is dropped.
    """
    group: list = []
    for index, batch in enumerate(batches):
        if index < skip * world:
            continue
        group.append(batch)
        if len(group) == world:
            yield group[rank]
            group = []


def _make_average(
    model: nn.Module, decay: float | None, stored: dict | None
) -> ExponentialMovingAverage | None:
    """The moving average of ``model``'s weights (None without ``decay``):
    the one ``stored`` in a checkpoint if there is one, continued at
    ``decay``, else a new one starting from the current weights."""
    if not decay:
        return None
    average = ExponentialMovingAverage(model, decay)
    if stored is not None:
        average.load_state_dict(stored)
        average.decay = decay
    return average


class Trainer:
    """The pieces of :func:`fit`: a model, its optimiser, counters and history.

    ``fit(model, train, valid, config, ...)`` is
    ``Trainer(model, config, valid_batches=valid, ...).run(train)``. Building
    a trainer picks the device (and joins the process group under
    ``torchrun``), seeds the generators, makes the optimiser and, with
    ``config.resume``, loads ``checkpoint_dir/last.pt``. :meth:`step` takes
    one optimiser step, for code that drives training batch by batch (the
    benchmarks); :meth:`run` is the whole loop.

    Args:
        model: a seq2seq model, ``model(src, tgt_in) -> logits (B, T, V)``,
            or a language model, ``model(inputs) -> logits (B, T, V)``
            (the batches say which: :func:`~.loss.batch_parts`);
            moved to the device and trained in place.
        config: a :class:`TrainConfig` (default: ``TrainConfig()``).
        valid_batches: batches for :meth:`validate`.
        vocabs: stored in checkpoints.
        callback: called with the history after each validation (rank 0).
        on_step: called with a :class:`StepReport` after each optimiser step
            (in every process under ``torchrun``).
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig | None = None,
        *,
        valid_batches: Iterable | None = None,
        vocabs: dict[str, Any] | None = None,
        callback: Callable[[History], None] | None = None,
        on_step: Callable[[StepReport], None] | None = None,
    ):
        cfg = config if config is not None else TrainConfig()
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"fit: config must be a TrainConfig, got {type(cfg).__name__}")
        self.config, self.valid_batches, self.vocabs = cfg, valid_batches, vocabs
        self.callback, self.on_step = callback, on_step
        self._start = time.perf_counter()  # the clock of max_minutes
        self.device = dist_utils.device_for_rank(pick_device(cfg.device))  # DDP under torchrun
        self.rank, self.world = dist_utils.rank_and_world()
        self.model = model.to(self.device)
        self._wrapped = dist_utils.wrap(self.model, self.device)  # DDP or the model itself
        self.pad_id = pad_id_of(self.model, cfg.pad_id)
        self.optimizer = make_optimizer(self.model, cfg)
        self._cast = autocast_for(self.device, cfg.amp)
        #: how the forward pass computes, in words, e.g. "float32 (asked for)"
        self.precision = precision(self.device, cfg.amp)[1]
        self.history, self.state = History(), _State()
        self.checkpoint_dir = Path(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        if cfg.seed is not None:
            torch.manual_seed(cfg.seed)
            random.seed(cfg.seed)
        stored_average = self._resume() if cfg.resume else None
        self.average = _make_average(self.model, cfg.ema_decay, stored_average)
        self._saved_at = self.state.step if cfg.resume else None  # step of last.pt
        self._per_epoch = math.inf  # this process's batches an epoch, once known
        self._elapsed = 0.0  # the last reading of the shared clock
        self._validated_at = -1
        # the history's clock continues after a resume (tokens/s of the whole run)
        self._train_seconds = self.history.seconds[-1] if self.history.seconds else 0.0
        self._finite_until = len(self.history.train_loss)  # losses checked so far
        self._interrupted: str | bool = False  # the signal seen (SIGINT...): stop after the step

    def _resume(self) -> dict | None:
        """Load ``checkpoint_dir/last.pt`` if it exists: weights, optimiser,
        counters, history, random generators, each first checked against the
        model and optimiser built here
        (:func:`~minitransformer.training.resume_checks.check_resume`; a
        mismatch raises ``ResumeMismatchError`` before anything is loaded).
        Returns the stored average's state (None if the run kept none or
        there is no checkpoint)."""
        path = self.checkpoint_dir / "last.pt"
        if not path.is_file():
            return None
        ckpt = load_checkpoint(path, map_location=self.device)
        for key in ("optimizer_state", "train_state", "rng"):
            if not ckpt.get(key):
                raise ValueError(f"fit: cannot resume from {path}: it holds no {key} (saved "
                                 "without an optimizer, or not by fit)")
        try:  # everything is checked before anything is loaded
            check_resume(ckpt, self.model, self.optimizer, _State)
        except ResumeMismatchError as err:
            raise ResumeMismatchError(f"fit: cannot resume from {path}: {err}") from None
        optimizer_state = ckpt["optimizer_state"]
        for stored, own in zip(optimizer_state["param_groups"], self.optimizer.param_groups,
                               strict=True):
            for flag in IMPLEMENTATION_FLAGS:  # this optimizer's kernel, not the stored one's
                if flag in own:
                    stored[flag] = own[flag]
        self.model.load_state_dict(ckpt["model_state"])
        self.optimizer.load_state_dict(optimizer_state)
        stored = ckpt["train_state"]
        self.state = _State(**{f.name: stored[f.name] for f in fields(_State)})
        self.history = History.from_dict(stored["history"])
        set_rng_state(ckpt["rng"])
        return ckpt.get("average")

    def step(self, batch: Any) -> StepReport:
        """One optimiser step on ``batch`` (this process's share of the global
        batch): learning rate from the schedule, forward, loss, backward,
        clipping, Adam, then the average, the counters and the history."""
        t0 = time.perf_counter()
        cfg, state = self.config, self.state
        spent = _budget_spent(cfg, state, self._elapsed, self._per_epoch)
        lr = learning_rate(state.step + 1, cfg.lr, cfg.schedule, cfg.warmup_steps, spent)
        loss, tokens = _optimiser_step(
            self._wrapped, self.optimizer, batch_parts(batch), lr, cfg, self.pad_id, self.device,
            self._cast,
        )
        if self.average is not None:
            self.average.update(self.model)
        state.step += 1
        state.batch_in_epoch += 1
        seconds = time.perf_counter() - t0
        self._train_seconds += seconds
        self.history.add_step(state.step, loss, tokens * self.world, self._train_seconds)
        report = StepReport(state.step, state.epoch, loss, tokens, lr, seconds, self.model)
        if self.on_step is not None:
            self.on_step(report)
        return report

    def validate(self) -> None:
        """Validation loss (of the average, if kept) into the history, then
        ``best.pt`` (on a new best) and ``last.pt``, then the callback."""
        state = self.state
        self._validated_at = state.step
        self.history.flush()
        self._check_finite()
        if self.valid_batches is not None:
            average = self.average
            with average.swapped_in(self.model) if average is not None else nullcontext():
                loss = evaluate_loss(
                    self.model, self.valid_batches, self.pad_id, self.device, self.config.amp
                )
            if not math.isfinite(loss):
                raise self._diverged(f"the validation loss is {loss} at step {state.step}")
            epoch = state.epoch + state.batch_in_epoch / self._per_epoch
            self.history.add_valid(state.step, epoch, loss)
            if loss < state.best_valid:
                state.best_valid = loss
                self.save("best.pt")
        self.save("last.pt")
        dist_utils.barrier()
        if self.callback is not None and self.rank == 0:
            self.callback(self.history)

    def save(self, name: str) -> None:
        """Write ``checkpoint_dir/name`` (rank 0 only; nothing without a folder)."""
        if self.checkpoint_dir is None or self.rank != 0:
            return
        save_checkpoint(
            self.checkpoint_dir / name, self.model, self.optimizer, average=self.average,
            train_state={**asdict(self.state), "history": self.history.to_dict()},
            train_config=self.config, vocabs=self.vocabs,
        )
        if name == "last.pt":
            self._saved_at = self.state.step

    def _check_finite(self) -> None:
        """Raise :class:`TrainingDivergedError` if a training loss recorded
        since the last check is NaN or infinite (in any process)."""
        start, self._finite_until = self._finite_until, len(self.history.train_loss)
        steps, losses = self.history.step[start:], self.history.train_loss[start:]
        bad = next(((s, x) for s, x in zip(steps, losses, strict=True)
                    if not math.isfinite(x)), None)
        if dist_utils.is_on():  # every process stops together
            flag = torch.tensor([0.0 if bad is None else 1.0], device=self.device)
            if dist_utils.all_reduce_max(flag).item() and bad is None:
                bad = (self.state.step, "not finite in another process")
        if bad is not None:
            raise self._diverged(f"the training loss is {bad[1]} at step {bad[0]}")

    def _diverged(self, what: str) -> TrainingDivergedError:
        kept = ("nothing was saved" if self._saved_at is None or self.checkpoint_dir is None
                else f"the last checkpoint, of step {self._saved_at}, is kept")
        return TrainingDivergedError(
            f"fit: training diverged: {what} (not finite); {kept}; try a lower learning rate"
        )

    @contextmanager
    def _ctrl_c_stops_after_the_step(self) -> Iterator[None]:
        """While training, Ctrl-C (SIGINT) or SIGTERM (``kill``, a job
        scheduler) lets the current step finish; the loop then saves
        ``last.pt`` and raises ``KeyboardInterrupt``. A second signal
        interrupts at once. Only in the main thread of a single process, and
        for each signal only if its handler is the default one (Python's for
        SIGINT, the system's for SIGTERM)."""
        defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
        usable = threading.current_thread() is threading.main_thread() and not dist_utils.is_on()
        taken = [s for s, default in defaults.items()
                 if usable and signal.getsignal(s) is default]

        def handler(signum, frame):
            if self._interrupted:
                raise KeyboardInterrupt(f"fit: interrupted by {signal.Signals(signum).name}")
            self._interrupted = signal.Signals(signum).name

        for signum in taken:
            signal.signal(signum, handler)
        try:
            yield
        finally:
            for signum in taken:
                signal.signal(signum, defaults[signum])

    def _stop_for_ctrl_c(self) -> None:
        self.history.flush()
        self._check_finite()
        self.save("last.pt")
        by = "" if self._interrupted == "SIGINT" else f" by {self._interrupted}"
        where = f"; last.pt saved at step {self.state.step}" if self.checkpoint_dir else ""
        raise KeyboardInterrupt(f"fit: interrupted{by}{where}")

    def run(self, train_batches: Iterable, progress: bool = True) -> History:
        """Train until a budget of the config is spent, validate, and leave
        the average (if kept) in the model; returns the history."""
        n_batches = len(train_batches) if hasattr(train_batches, "__len__") else None
        self._per_epoch = (n_batches // self.world) if n_batches else math.inf
        show = progress and self.rank == 0
        bar = _progress_bar(self.config, self._per_epoch, self.state.step, enabled=show)
        self.model.train()
        try:
            with self._ctrl_c_stops_after_the_step():
                reason = self._tick()
                while reason is None:
                    reason = self._run_epoch(train_batches, bar)
        except BaseException:
            if bar is not None:
                bar.close()
            raise
        if self._validated_at != self.state.step:
            self.validate()
        if self.average is not None:
            self.average.copy_to(self.model)
        self.history.stop_reason = reason
        _update_bar(bar, self.history, self.config, self._start)
        if bar is not None:
            bar.close()
        return self.history

    def _tick(self) -> str | None:
        """Read the shared clock (once per step, the same value in every
        process); the reason to stop now, or None."""
        self._elapsed = _elapsed(self._start, self.device)
        return _stop_reason(self.config, self.state, self._elapsed)

    def _run_epoch(self, train_batches: Iterable, bar) -> str | None:
        """Train on the rest of the current epoch; the reason to stop, or None
        when the epoch is done and no budget is spent."""
        cfg, state = self.config, self.state
        if hasattr(train_batches, "set_epoch"):
            train_batches.set_epoch(state.epoch)  # reshuffle reproducibly
        fresh, steps = state.batch_in_epoch == 0, 0
        for batch in _own_batches(train_batches, state.batch_in_epoch, self.rank, self.world):
            self.step(batch)
            steps += 1
            if self._interrupted:
                self._stop_for_ctrl_c()
            if state.step % cfg.log_every == 0:
                self.history.flush()
                self._check_finite()
                _update_bar(bar, self.history, cfg, self._start)
            if cfg.eval_every and state.step % cfg.eval_every == 0:
                self.validate()
            reason = self._tick()
            if reason is not None:
                return reason
        if fresh and steps == 0:  # else the loop would never end
            each = f" ({self.world} per step, one per process)" if self.world > 1 else ""
            raise ValueError(f"fit: train_batches gave no batch for a step{each}")
        state.epoch += 1
        state.batch_in_epoch = 0
        if not cfg.eval_every:
            self.validate()
        return self._tick()


def fit(
    model: nn.Module,
    train_batches: Iterable,
    valid_batches: Iterable | None = None,
    config: TrainConfig | None = None,
    progress: bool = True,
    *,
    vocabs: dict[str, Any] | None = None,
    callback: Callable[[History], None] | None = None,
    on_step: Callable[[StepReport], None] | None = None,
) -> History:
    """Train ``model`` in place and return its :class:`History`.

    Args:
        model: a seq2seq model, ``model(src, tgt_in) -> logits (B, T, V)``,
            trained on :class:`~minitransformer.data.Batch` batches, or a
            language model, ``model(inputs) -> logits (B, T, V)``, trained on
            :class:`~minitransformer.data.LMBatch` batches (next-token or
            masked-LM targets; :class:`~minitransformer.data.LMBatcher`).
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
        on_step: called with a :class:`StepReport` (step, loss, tokens,
            learning rate, the model, ...) after each optimiser step.

    Training stops at whichever of ``epochs``, ``max_steps`` or ``max_minutes``
    comes first; then it evaluates and (if ``checkpoint_dir``) saves.

    With ``config.ema_decay`` an
    :class:`~minitransformer.training.averaging.ExponentialMovingAverage`
    of the weights is updated after every step; validation losses are those
    of the averaged weights, checkpoints store it beside the trained weights
    (:func:`~minitransformer.training.checkpoint.build_model` loads it), and
    ``model`` holds it when ``fit`` returns. The pieces are :class:`Trainer`'s.
    """
    trainer = Trainer(
        model, config, valid_batches=valid_batches, vocabs=vocabs, callback=callback,
        on_step=on_step,
    )
    return trainer.run(train_batches, progress=progress)


def _optimiser_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    parts: tuple[tuple[Tensor, ...], Tensor],
    lr: float,
    cfg: TrainConfig,
    pad: int,
    device: torch.device,
    cast: Callable[[], Any],
) -> tuple[Tensor, int]:
    """Forward, loss, backward, clipping and one optimiser step at ``lr`` on
    ``(the model's inputs, the targets (B, T))`` (:func:`~.loss.batch_parts`);
    returns (the detached loss, the tokens processed (:func:`~.loss.input_tokens`))."""
    inputs = tuple(t.to(device, non_blocking=True) for t in parts[0])
    target = parts[1].to(device, non_blocking=True)
    for group in optimizer.param_groups:
        group["lr"] = lr
    with cast():
        logits = model(*inputs)  # (B, T, V)
    summed, count = loss_sum(logits, target, cfg.label_smoothing, pad)
    # Mean over the non-pad tokens of the *global* batch: each process divides
    # by the total count; DDP then averages (÷ world), so multiply back.
    total = dist_utils.all_reduce_sum(count.detach().clone()) if dist_utils.is_on() else count
    _, world = dist_utils.rank_and_world()
    loss = summed * world / total.clamp(min=1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.clip_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    optimizer.step()
    tokens = input_tokens(inputs, count, pad)
    return (summed / count.clamp(min=1)).detach(), tokens


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
