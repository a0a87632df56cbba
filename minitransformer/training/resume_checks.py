"""Checks of a checkpoint against the model and optimiser it is resumed into.

``fit(config=TrainConfig(resume=True))`` loads weights, Adam's moments,
counters and random generator states from ``last.pt``. PyTorch's own
``load_state_dict`` methods trust what they are given: a moment tensor of
the wrong shape is accepted by ``Optimizer.load_state_dict`` and the fused
Adam kernel then writes past its end (a segmentation fault), a 1-element
tensor is broadcast silently by ``Tensor.copy_``. :func:`check_resume`
compares everything a resume will hand to those methods with what the
model and the optimiser built for the run expect (names, shapes, dtypes,
devices, value ranges, finiteness), before any of it is touched, and
raises :class:`ResumeMismatchError` (one line, naming the first entry that
does not match).
"""

from __future__ import annotations

import math
import random
from dataclasses import fields
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "ResumeMismatchError",
    "check_resume",
    "check_model_state",
    "check_optimizer_state",
    "check_rng_state",
    "check_train_state",
    "check_average",
]


class ResumeMismatchError(ValueError):
    """A checkpoint's entry does not fit the model or optimiser it is loaded into."""


def _describe(t: Tensor) -> str:
    return f"shape {tuple(t.shape)}, {t.dtype}, on {t.device}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_like(what: str, stored: Any, expected: Tensor, same_device: bool = True) -> None:
    """``stored`` must be a tensor of ``expected``'s shape, dtype and (if
    ``same_device``) device, and finite if it is floating point."""
    if not isinstance(stored, Tensor):
        raise ResumeMismatchError(f"{what} is a {type(stored).__name__}, expected a tensor "
                                  f"of {_describe(expected)}")
    device = expected.device if same_device else stored.device
    if (stored.shape, stored.dtype, stored.device) != (expected.shape, expected.dtype, device):
        raise ResumeMismatchError(f"{what} has {_describe(stored)}; expected "
                                  f"{_describe(expected)}")
    if stored.is_floating_point() and not bool(torch.isfinite(stored).all()):
        raise ResumeMismatchError(f"{what} holds values that are not finite (NaN or inf)")


def check_model_state(state: Any, model: nn.Module, what: str = "model_state") -> None:
    """``state`` must hold exactly ``model.state_dict()``'s names, each with
    the same shape, dtype and device, and finite floating-point values."""
    if not isinstance(state, dict):
        raise ResumeMismatchError(f"{what} is a {type(state).__name__}, expected a dict")
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [str(k)[:100] for k in state if k not in expected]
    if missing or unexpected:
        first = f"lacks {missing[0]!r}" if missing else f"has {unexpected[0]!r}"
        raise ResumeMismatchError(f"{what} does not fit the model: it {first} ({len(missing)} "
                                  f"missing, {len(unexpected)} unexpected tensors)")
    for name, tensor in expected.items():
        _check_like(f"{what}[{name!r}]", state[name], tensor)


def _param_names(model: nn.Module) -> dict[int, str]:
    return {id(p): n for n, p in getattr(model, "module", model).named_parameters()}


#: Parameter-group options that choose a kernel, not the update; a resume
#: keeps the optimizer's own (the stored ones may name a kernel this device lacks).
IMPLEMENTATION_FLAGS = ("foreach", "fused", "capturable", "differentiable")

#: The per-parameter state Adam keeps (``max_exp_avg_sq`` only with amsgrad).
_ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")


def check_optimizer_state(
    stored: Any, optimizer: torch.optim.Optimizer, model: nn.Module, max_step: int
) -> None:
    """``stored`` must be a state of ``optimizer`` itself: the same parameter
    groups (same parameter indices and options, finite hyperparameters) and,
    for each parameter, Adam's moments with the parameter's shape, dtype and
    device (finite, the second moment non-negative) and a step count that is
    a whole number in ``[0, max_step]``."""
    if not isinstance(stored, dict) or set(stored) != {"state", "param_groups"}:
        raise ResumeMismatchError("optimizer_state is not an optimizer state_dict (expected "
                                  "a dict of 'state' and 'param_groups')")
    own = optimizer.state_dict()
    groups, state = stored["param_groups"], stored["state"]
    if not isinstance(groups, list) or len(groups) != len(own["param_groups"]):
        n = len(groups) if isinstance(groups, list) else type(groups).__name__
        raise ResumeMismatchError(f"optimizer_state has {n} parameter groups; the optimizer "
                                  f"has {len(own['param_groups'])}")
    params: dict[int, Tensor] = {}
    names = _param_names(model)
    for g, (group, mine, live) in enumerate(
        zip(groups, own["param_groups"], optimizer.param_groups, strict=True)
    ):
        _check_param_group(f"optimizer_state param_groups[{g}]", group, mine)
        params.update(zip(mine["params"], live["params"], strict=True))
    if not isinstance(state, dict):
        raise ResumeMismatchError(f"optimizer_state['state'] is a {type(state).__name__}, "
                                  "expected a dict")
    amsgrad = any(group.get("amsgrad") for group in own["param_groups"])
    moments = (*_ADAM_MOMENTS, "max_exp_avg_sq") if amsgrad else _ADAM_MOMENTS
    adam = isinstance(optimizer, torch.optim.Adam)
    for index, entry in state.items():
        if index not in params:
            raise ResumeMismatchError(f"optimizer_state['state'] has an entry for parameter "
                                      f"{str(index)[:20]}, which the optimizer does not have")
        param = params[index]
        where = f"optimizer_state['state'][{index}] ({names.get(id(param), '?')})"
        _check_param_state(where, entry, param, moments, adam, max_step)


def _check_param_group(where: str, group: Any, mine: dict[str, Any]) -> None:
    """A stored parameter group ``group`` must have the keys and parameter
    indices of the optimizer's own group ``mine`` and acceptable options."""
    if not isinstance(group, dict) or set(group) != set(mine):
        keys = sorted(map(str, group)) if isinstance(group, dict) else type(group).__name__
        raise ResumeMismatchError(f"{where} has keys {keys}; the optimizer's are "
                                  f"{sorted(mine)}")
    if group["params"] != mine["params"]:
        listed = group["params"]
        count = len(listed) if isinstance(listed, list) else type(listed).__name__
        raise ResumeMismatchError(f"{where} lists {count} parameters; the optimizer has "
                                  f"{len(mine['params'])} (another model?)")
    for key, value in mine.items():
        if key == "params":
            continue
        found = group[key]
        if not _group_option_ok(key, found, value):
            raise ResumeMismatchError(f"{where}[{key!r}] is {str(found)[:50]}; expected "
                                      f"something like {value!r}")


def _group_option_ok(key: str, found: Any, value: Any) -> bool:
    """Whether the stored option ``found`` may stand for the optimizer's ``value``."""
    if key == "betas":
        return (isinstance(found, (tuple, list)) and len(found) == 2
                and all(_is_number(b) and 0 <= b < 1 for b in found))
    if _is_number(value):
        return _is_number(found) and math.isfinite(found) and found >= 0
    if key in IMPLEMENTATION_FLAGS:  # how to compute, not what: the optimizer's wins
        return found is None or isinstance(found, bool)
    # flags (fused, amsgrad, ...) and None: must be the optimizer's own
    return type(found) is type(value) and found == value


def _check_param_state(
    where: str, entry: Any, param: Tensor, moments: tuple[str, ...], adam: bool, max_step: int
) -> None:
    """One parameter's stored optimizer state ``entry``: a dict (for Adam, with
    exactly ``step`` and ``moments``), a valid step, and tensors like ``param``
    (all but ``exp_avg`` non-negative)."""
    if not isinstance(entry, dict) or (adam and set(entry) != {"step", *moments}):
        keys = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
        raise ResumeMismatchError(f"{where} has {keys}; Adam keeps "
                                  f"{sorted({'step', *moments})}")
    for key, value in entry.items():
        if key == "step":
            _check_step(f"{where}['step']", value, max_step)
            continue
        _check_like(f"{where}[{key!r}]", value, param.detach())
        if key != "exp_avg" and bool((value < 0).any()):
            raise ResumeMismatchError(f"{where}[{key!r}] holds negative values (a second "
                                      "moment is a mean of squares)")


def _check_step(what: str, value: Any, max_step: int) -> None:
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.dim() != 0 or not value.is_floating_point():
            raise ResumeMismatchError(f"{what} has {_describe(value)}; expected a "
                                      "floating-point scalar")
        value = float(value)
    if not _is_number(value) or not math.isfinite(value) or value != int(value) \
            or not 0 <= value <= max_step:
        raise ResumeMismatchError(f"{what} is {str(value)[:30]}; expected a whole number of "
                                  f"steps in [0, {max_step}] (the run's step)")


def check_train_state(stored: Any, state_fields: type) -> None:
    """``stored`` must hold the loop's counters (``state_fields``, a
    dataclass): whole numbers >= 0 for the counters, a number that is not NaN
    for ``best_valid``, and a history of lists no longer than ``step``."""
    if not isinstance(stored, dict):
        raise ResumeMismatchError(f"train_state is a {type(stored).__name__}, expected a dict")
    for f in fields(state_fields):
        if f.name not in stored:
            raise ResumeMismatchError(f"train_state lacks {f.name!r}")
        value = stored[f.name]
        if isinstance(f.default, float):
            if not _is_number(value) or math.isnan(value):
                raise ResumeMismatchError(f"train_state[{f.name!r}] is {str(value)[:30]}; "
                                          "expected a number (not NaN)")
        elif not _is_int(value) or value < 0:
            raise ResumeMismatchError(f"train_state[{f.name!r}] is {str(value)[:30]}; "
                                      "expected a whole number >= 0")
    history = stored.get("history")
    if not isinstance(history, dict):
        raise ResumeMismatchError("train_state['history'] is not a dict")
    from .history import History

    known = {f.name for f in fields(History)}
    for key, value in history.items():
        if key not in known:
            raise ResumeMismatchError(f"train_state['history'] has an unknown entry "
                                      f"{str(key)[:50]!r}")
        if key == "stop_reason":
            if value is not None and not isinstance(value, str):
                raise ResumeMismatchError("train_state['history']['stop_reason'] is not a "
                                          "string")
        elif not isinstance(value, list) or not all(_is_number(x) for x in value):
            raise ResumeMismatchError(f"train_state['history'][{key!r}] is not a list of "
                                      "numbers")
    lengths = {len(history.get(k, [])) for k in ("step", "train_loss", "tokens", "seconds")}
    if len(lengths) != 1 or lengths.pop() > stored["step"]:
        raise ResumeMismatchError("train_state['history'] has per-step lists of different "
                                  "lengths, or more steps than train_state['step']")


def check_rng_state(stored: Any) -> None:
    """``stored`` must be what :func:`~minitransformer.training.checkpoint.get_rng_state`
    returns on this machine: torch's state as a ``uint8`` tensor of the
    size ``torch.get_rng_state()`` has, Python's and NumPy's Mersenne
    Twister states with 624 32-bit words, and (when stored and CUDA is
    available) CUDA states of the size this machine's have."""
    if not isinstance(stored, dict):
        raise ResumeMismatchError(f"rng is a {type(stored).__name__}, expected a dict")
    for key in ("torch", "python", "numpy"):
        if key not in stored:
            raise ResumeMismatchError(f"rng lacks the {key!r} generator's state")
    # (a checkpoint loaded with map_location puts these on that device:
    # set_rng_state moves them back to the CPU)
    _check_like("rng['torch']", stored["torch"], torch.get_rng_state(), same_device=False)
    python = stored["python"]
    version, internal, gauss = random.getstate()
    if not (isinstance(python, (tuple, list)) and len(python) == 3 and python[0] == version
            and isinstance(python[1], (tuple, list)) and len(python[1]) == len(internal)
            and all(_is_int(w) and 0 <= w < 2**32 for w in python[1][:-1])
            and _is_int(python[1][-1]) and 0 <= python[1][-1] <= len(internal) - 1
            and (python[2] is None or isinstance(python[2], float))):
        raise ResumeMismatchError(f"rng['python'] is not a state of Python's random module "
                                  f"(version {version}, {len(internal)} words)")
    numpy = stored["numpy"]
    if not (isinstance(numpy, (tuple, list)) and len(numpy) == 5 and numpy[0] == "MT19937"
            and isinstance(numpy[1], Tensor) and numpy[1].shape == (624,)
            and numpy[1].dtype == torch.int64 and bool(((numpy[1] >= 0) & (numpy[1] < 2**32))
                                                        .all())
            and _is_int(numpy[2]) and 0 <= numpy[2] <= 624
            and _is_int(numpy[3]) and numpy[3] in (0, 1) and isinstance(numpy[4], float)):
        raise ResumeMismatchError("rng['numpy'] is not a state of NumPy's MT19937 generator "
                                  "(624 words as int64 in [0, 2**32))")
    cuda = stored.get("cuda")
    if cuda is not None and torch.cuda.is_available():  # one state per device it was saved on
        if not isinstance(cuda, (list, tuple)):
            raise ResumeMismatchError("rng['cuda'] is not a list of CUDA generator states")
        expected = torch.cuda.get_rng_state(0)  # every CUDA generator's state has this size
        for i, state in enumerate(cuda):
            _check_like(f"rng['cuda'][{i}]", state, expected, same_device=False)


def check_average(stored: Any, model: nn.Module) -> None:
    """``stored`` must be an ``ExponentialMovingAverage.state_dict()`` of
    ``model``: a decay in (0, 1), a whole number of updates and, for each
    floating-point parameter, a finite tensor of its shape, dtype and device."""
    if not isinstance(stored, dict) or set(stored) != {"decay", "num_updates", "averaged"}:
        raise ResumeMismatchError("the weight average is not a dict of decay, num_updates "
                                  "and averaged")
    if not _is_number(stored["decay"]) or not 0 < stored["decay"] < 1:
        raise ResumeMismatchError(f"the weight average's decay is {str(stored['decay'])[:30]}; "
                                  "expected a number in (0, 1)")
    if not _is_int(stored["num_updates"]) or stored["num_updates"] < 0:
        raise ResumeMismatchError("the weight average's num_updates is not a whole number >= 0")
    params = {n: p.detach() for n, p in getattr(model, "module", model).named_parameters()
              if p.is_floating_point()}
    averaged = stored["averaged"]
    if not isinstance(averaged, dict) or set(averaged) != set(params):
        raise ResumeMismatchError("the weight average is of other parameters than the model's")
    for name, param in params.items():
        _check_like(f"average[{name!r}]", averaged[name], param)


def check_resume(
    ckpt: dict, model: nn.Module, optimizer: torch.optim.Optimizer, state_fields: type
) -> None:
    """Check every entry of a loaded checkpoint that resuming uses:
    ``model_state`` (against ``model``), ``optimizer_state`` (against
    ``optimizer``, built for ``model``), ``train_state`` (the loop's counters,
    the dataclass ``state_fields``), ``rng`` and, if present, ``average``.
    Raises :class:`ResumeMismatchError` naming the first entry that does not fit."""
    check_model_state(ckpt.get("model_state"), model)
    check_train_state(ckpt.get("train_state"), state_fields)
    check_optimizer_state(ckpt.get("optimizer_state"), optimizer, model,
                          max_step=ckpt["train_state"]["step"])
    check_rng_state(ckpt.get("rng"))
    if ckpt.get("average") is not None:
        check_average(ckpt["average"], model)
