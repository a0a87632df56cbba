"""Checkpoints: everything needed to use a trained model or to resume training.

A checkpoint is one file written by :func:`torch.save` that holds only
tensors and plain Python values (dicts, lists, tuples, numbers, strings), so
it loads with ``torch.load(weights_only=True)``, which cannot run code hidden
in the file. It holds:

- ``model_class``, ``model_config`` (a dict) and ``model_state``: enough to
  rebuild the model (:func:`build_model`);
- ``optimizer_state`` and ``train_state`` (step, epoch, position in the
  epoch, history): enough to resume;
- ``rng``: the random number generators' states (torch CPU and CUDA,
  Python's ``random``, NumPy's), so dropout and shuffling continue exactly;
- ``vocabs`` (``{"src": ..., "tgt": ...}`` as dicts), ``train_config``
  and any ``extra`` plain values.

Files are written atomically: to a temporary file in the same folder, then
renamed over the target (:func:`os.replace`), so a crash never leaves a
half-written checkpoint under the real name.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "build_model",
    "get_rng_state",
    "set_rng_state",
    "CHECKPOINT_FORMAT",
]

#: Version of the checkpoint layout, stored under ``"format"``.
CHECKPOINT_FORMAT = 1


def get_rng_state() -> dict[str, Any]:
    """The states of torch's (CPU and CUDA), Python's and NumPy's generators,
    as tensors and plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _plain(obj: Any) -> Any:
    """Vocabularies and configs as plain dicts (``to_dict()`` or a dataclass)."""
    if obj is None or isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    raise TypeError(
        f"checkpoint: expected a dict, a dataclass or an object with to_dict(), "
        f"got {type(obj).__name__}"
    )


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    train_state: dict | None = None,
    train_config: Any = None,
    vocabs: dict[str, Any] | None = None,
    extra: dict | None = None,
    rng: bool = True,
) -> Path:
    """Write a checkpoint atomically to ``path`` and return it.

    Args:
        path: the file to write (its folder is created).
        model: the model; unwrapped from ``DistributedDataParallel`` if needed.
            Its ``config`` (a dataclass or an object with ``to_dict()``) is
            stored so :func:`build_model` can rebuild it.
        optimizer: stored for resuming if given.
        train_state: the training loop's counters and history (plain values).
        train_config: a ``TrainConfig`` (stored as a dict).
        vocabs: e.g. ``{"src": src_vocab, "tgt": tgt_vocab}``; each a dict or
            an object with ``to_dict()``.
        extra: any other plain values.
        rng: also store the random generators' states.
    """
    model = getattr(model, "module", model)
    config = getattr(model, "config", None)
    ckpt = {
        "format": CHECKPOINT_FORMAT,
        "model_class": _qualified_name(type(model)),
        "config_class": _qualified_name(type(config)) if config is not None else None,
        "model_config": _plain(config),
        "model_state": model.state_dict(),
        "optimizer_state": optimizer.state_dict() if optimizer is not None else None,
        "train_state": train_state,
        "train_config": _plain(train_config),
        "vocabs": {k: _plain(v) for k, v in (vocabs or {}).items()},
        "extra": extra or {},
        "rng": get_rng_state() if rng else None,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(ckpt, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint with ``torch.load(weights_only=True)``.

    Accepts a file or a folder (then ``last.pt`` inside it). Raises
    ``FileNotFoundError`` if there is none and ``ValueError`` if the file is
    not a readable checkpoint.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "last.pt"
    if not path.is_file():
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # truncated, corrupt or not a torch file
        raise ValueError(f"load_checkpoint: {path} is not a readable checkpoint ({exc})") from exc
    if not isinstance(ckpt, dict) or "model_state" not in ckpt:
        raise ValueError(f"load_checkpoint: {path} does not hold a minitransformer checkpoint")
    return ckpt


def _import(name: str) -> type:
    module, _, qualname = name.partition(":")
    if not module.startswith("minitransformer"):
        raise ValueError(
            f"build_model: the checkpoint names class {name!r}; only classes of the "
            f"minitransformer package are rebuilt automatically: build the model "
            f"yourself and call model.load_state_dict(ckpt['model_state'])"
        )
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def build_model(
    ckpt: dict | str | os.PathLike, map_location: str | torch.device = "cpu"
) -> nn.Module:
    """Rebuild the model stored in a checkpoint (a dict or a path), weights
    loaded, in ``eval()`` mode. Works for models of this package whose
    ``__init__`` takes their config object."""
    if not isinstance(ckpt, dict):
        ckpt = load_checkpoint(ckpt, map_location)
    if ckpt.get("config_class") is None:
        raise ValueError("build_model: the checkpoint holds no model config")
    config_cls = _import(ckpt["config_class"])
    model = _import(ckpt["model_class"])(config_cls(**ckpt["model_config"]))
    model.load_state_dict(ckpt["model_state"])
    return model.to(map_location).eval()
