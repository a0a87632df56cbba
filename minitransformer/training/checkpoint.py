"""Checkpoints: everything needed to use a trained model or to resume training.

A checkpoint is one file written by :func:`torch.save` that holds only
tensors and plain Python values (dicts, lists, tuples, numbers, strings), so
it loads with ``torch.load(weights_only=True)``, which cannot run code hidden
in the file. It holds:

- ``format``: the layout's version, :data:`CHECKPOINT_FORMAT` (files of
  format 1, written before the weight average had its own entry, are read
  and converted; other versions are refused with a one-line error);
- ``model_class``, ``model_config`` (a dict) and ``model_state`` (the
  model's ``state_dict()``, the weights as trained): enough to rebuild the
  model (:func:`build_model`);
- ``average``: if the run kept a moving average of the weights, the
  average's own ``state_dict()``
  (:class:`~minitransformer.training.averaging.ExponentialMovingAverage`),
  else None. :func:`build_model` loads the averaged weights when there are
  some; a resumed run continues both;
- ``optimizer_state`` and ``train_state`` (step, epoch, position in the
  epoch, history): enough to resume;
- ``rng``: the random number generators' states (torch CPU and CUDA,
  Python's ``random``, NumPy's), so dropout and shuffling continue exactly;
- ``vocabs`` (``{"src": ..., "tgt": ...}`` as dicts), ``train_config``
  and any ``extra`` plain values.

Files are written atomically: to a temporary file in the same folder, then
renamed over the target (:func:`os.replace`), so a crash never leaves a
half-written checkpoint under the real name (a temporary file left by a
killed save is removed by the next save of the same name).

Loading runs nothing the file asks for. :func:`load_checkpoint` unpickles
only tensors and plain values; :func:`build_model` rebuilds only the
package's own models, looked up by name in :data:`MODEL_CLASSES` (never
imported by name), and checks the stored sizes against each other before
allocating anything: every tensor the config implies must be in the file
with that shape, and the model may not need much more memory than the file
holds (:data:`MAX_UNSTORED_BYTES`). Before ``torch.load``,
:func:`load_checkpoint` reads the zip directory and refuses compressed
entries (``torch.save`` stores them plain) and declared sizes beyond the
file's, so loading needs no more memory than the file's size;
:func:`build_model` refuses weights (and averages) that are not finite or
not of their parameter's shape. Resuming checks the rest against the model
and optimiser it builds (:mod:`minitransformer.training.resume_checks`).
A save that fails (disk full, file-size limit) raises
:class:`CheckpointWriteError` and leaves the file of that name as it was.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import random
import re
import tempfile
import zipfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..seq2seq import MODELS
from ..seq2seq import qualified_name as _qualified_name
from .averaging import ExponentialMovingAverage

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "build_model",
    "MODEL_CLASSES",
    "MAX_UNSTORED_BYTES",
    "get_rng_state",
    "set_rng_state",
    "CHECKPOINT_FORMAT",
    "CheckpointWriteError",
]

#: Version of the checkpoint layout, stored under ``"format"`` and checked on
#: loading. 2: the weight average as its own ``state_dict`` under ``"average"``.
#: (Format 1 stored the average as ``model_state`` and the trained weights in
#: ``train_state["ema"]``; :func:`load_checkpoint` converts it.)
CHECKPOINT_FORMAT = 2


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
    """Restore what :func:`get_rng_state` returned (its tensors may be on
    any device: a checkpoint loaded with ``map_location`` moves them)."""
    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():  # the devices present (maybe fewer)
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), device)


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


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    average: ExponentialMovingAverage | None = None,
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
        average: a moving average of the model's weights, stored beside them.
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
        "average": average.state_dict() if average is not None else None,
        "optimizer_state": optimizer.state_dict() if optimizer is not None else None,
        "train_state": train_state,
        "train_config": _plain(train_config),
        "vocabs": {k: _plain(v) for k, v in (vocabs or {}).items()},
        "extra": extra or {},
        "rng": get_rng_state() if rng else None,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)  # left by a save that was killed (one writer per file)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise CheckpointWriteError(_write_failure(path, err)) from None
    try:
        # Serialised in memory first: torch.save reports a failed write to a
        # file as an opaque RuntimeError, a plain write raises OSError (ENOSPC, EFBIG).
        buffer = io.BytesIO()
        torch.save(ckpt, buffer)
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise CheckpointWriteError(_write_failure(path, err)) from None
        raise
    return path


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, file-size limit, no
    permission); the file of that name, if any, is left as it was."""


def _write_failure(path: Path, err: BaseException | None) -> str:
    reason = getattr(err, "strerror", None) or (str(err).strip().splitlines() or ["?"])[0][:200]
    kept = "the previous one is kept" if path.exists() else "nothing was written"
    return f"save_checkpoint: cannot write {path} ({reason}); {kept}"


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint with ``torch.load(weights_only=True)``.

    Accepts a file or a folder (then ``last.pt`` inside it). Raises
    ``FileNotFoundError`` if there is none and ``ValueError`` (one line) if
    the file is not a readable checkpoint, e.g. truncated, or holding
    pickled objects other than tensors and plain values, which are refused
    because building them could run code, or of a format this version does
    not read. A file of format 1 is returned converted to
    :data:`CHECKPOINT_FORMAT`.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "last.pt"
    if not path.is_file():
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}")
    _check_archive(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # a refused object, truncated, corrupt or not a torch file
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if isinstance(exc, pickle.UnpicklingError) and found:
            raise ValueError(
                f"load_checkpoint: {path} holds Python objects other than tensors and plain "
                f"values ({found.group(1)}); refused, since building them could run code"
            ) from None
        reason = "corrupt or not a torch file"
        if not isinstance(exc, pickle.UnpicklingError) and str(exc).strip():
            reason = str(exc).strip().splitlines()[0][:200]
        raise ValueError(
            f"load_checkpoint: {path} is not a readable checkpoint ({reason})"
        ) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model_state"), dict):
        raise ValueError(f"load_checkpoint: {path} does not hold a minitransformer checkpoint")
    return _current_format(ckpt, f"load_checkpoint: {path}")


def _check_archive(path: Path) -> None:
    """Refuse, before ``torch.load`` unpacks anything, a file that is not the
    zip archive ``torch.save`` writes or that could expand in memory: every
    entry must be stored uncompressed (as ``torch.save`` stores them), so
    loading needs no more memory than the file's own size."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise ValueError(
            f"load_checkpoint: {path} is not a readable checkpoint (not the zip archive "
            f"torch.save writes: truncated, or another kind of file; {str(err)[:100]})"
        ) from None
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED or entry.file_size != entry.compress_size:
            raise ValueError(
                f"load_checkpoint: {path} holds a compressed entry ({entry.filename[:100]!r}: "
                f"{entry.compress_size:,} bytes unpacking to {entry.file_size:,}); torch.save "
                "stores entries uncompressed, so this file was made otherwise; refused, since "
                "unpacking it could take far more memory than the file's size"
            )
    unpacked, size = sum(e.file_size for e in entries), path.stat().st_size
    if unpacked > size:
        raise ValueError(
            f"load_checkpoint: {path} declares {unpacked:,} bytes of entries in a file of "
            f"{size:,} bytes; refused (a crafted zip directory)"
        )


def _current_format(ckpt: dict, where: str) -> dict:
    """``ckpt`` in :data:`CHECKPOINT_FORMAT`: format 1 converted, others refused."""
    found = ckpt.get("format")
    if found == 1:
        return _from_format_1(ckpt, where)
    if found != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{where} has checkpoint format {str(found)[:20]}; this version of "
            f"minitransformer reads formats 1 to {CHECKPOINT_FORMAT} (retrain, or load it "
            f"with the version that wrote it)"
        )
    return ckpt


def _from_format_1(ckpt: dict, where: str) -> dict:
    """Format 1 kept a run's weight average as ``model_state`` and the
    trained weights in ``train_state["ema"]["training_params"]``; move each
    where format 2 keeps it (``model_state`` and ``average``)."""
    ckpt = {**ckpt, "format": CHECKPOINT_FORMAT, "average": None}
    train_state = ckpt.get("train_state")
    ema = train_state.get("ema") if isinstance(train_state, dict) else None
    if ema is None:
        return ckpt
    try:
        trained, stored = dict(ema["training_params"]), ckpt["model_state"]
        ckpt["average"] = {"decay": ema["decay"], "num_updates": ema["num_updates"],
                           "averaged": {name: stored[name] for name in trained}}
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where}: its format-1 weight average is incomplete ({err})") from None
    ckpt["model_state"] = {**stored, **trained}
    ckpt["train_state"] = {k: v for k, v in train_state.items() if k != "ema"}
    return ckpt


#: The models :func:`build_model` rebuilds: the name stored in a checkpoint's
#: ``model_class`` (``"module:Class"``) → (model class, its config class), as
#: the model modules declare them (:func:`minitransformer.seq2seq.register_model`).
#: Nothing else is ever imported or called on a checkpoint's say-so.
MODEL_CLASSES: dict[str, tuple[type[nn.Module], type]] = MODELS

#: Names of these classes before the package's layout changes (``rnn.py``
#: became ``rnn/models.py``; ``TransformerConfig`` moved to ``config.py``), so
#: older checkpoints still load.
_FORMER_NAMES = {
    "minitransformer.rnn:SimpleSeq2Seq": "minitransformer.rnn.models:SimpleSeq2Seq",
    "minitransformer.rnn:ContextSeq2Seq": "minitransformer.rnn.models:ContextSeq2Seq",
    "minitransformer.rnn:AttentionSeq2Seq": "minitransformer.rnn.models:AttentionSeq2Seq",
    "minitransformer.rnn:RNNConfig": "minitransformer.rnn.models:RNNConfig",
    "minitransformer.model:TransformerConfig": "minitransformer.config:TransformerConfig",
}

#: How many bytes of tensors a rebuilt model may hold beyond those stored in
#: the checkpoint (buffers left out of ``state_dict``): a file cannot make
#: :func:`build_model` allocate much more memory than its own size.
MAX_UNSTORED_BYTES = 64 * 2**20


def _classes(ckpt: dict) -> tuple[type[nn.Module], type]:
    name, config_name = ckpt.get("model_class"), ckpt.get("config_class")
    if not isinstance(name, str) or not isinstance(config_name, str):
        raise ValueError("build_model: the checkpoint names no model class or config class")
    name = _FORMER_NAMES.get(name, name)
    if name not in MODEL_CLASSES:
        known = ", ".join(sorted(n.rpartition(":")[2] for n in MODEL_CLASSES))
        raise ValueError(
            f"build_model: the checkpoint names model class {name[:200]!r}, which is not one "
            f"of the package's models ({known}); build the model yourself and call "
            f"model.load_state_dict(ckpt['model_state'])"
        )
    model_cls, config_cls = MODEL_CLASSES[name]
    if _FORMER_NAMES.get(config_name, config_name) != _qualified_name(config_cls):
        raise ValueError(
            f"build_model: the checkpoint's config class {config_name[:200]!r} is not "
            f"{_qualified_name(config_cls)!r}, the config of {model_cls.__name__}"
        )
    return model_cls, config_cls


def _config(config_cls: type, values: Any) -> Any:
    if not isinstance(values, dict):
        raise ValueError("build_model: the checkpoint's model_config is not a dict")
    fields = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(str(k)[:50] for k in values if k not in fields)
    if unknown:
        raise ValueError(
            f"build_model: model_config has fields {config_cls.__name__} does not know: "
            f"{', '.join(unknown[:5])}"
        )
    for key, value in values.items():
        if not isinstance(value, (bool, int, float, str, type(None))):
            raise ValueError(
                f"build_model: model_config[{key!r}] is a {type(value).__name__}, "
                f"expected a number, a string or None"
            )
    try:
        return config_cls(**values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"build_model: invalid model_config ({err})") from None


def _tensor_bytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_sizes(model_cls: type[nn.Module], config: Any, state: dict) -> None:
    """Compare the tensors ``config`` implies with those of ``state`` without
    allocating them (the model is built on the ``meta`` device first)."""
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise ValueError("build_model: model_state must map names to tensors")
    stored = _tensor_bytes(state.values())
    # Integer sizes larger than the number of stored values cannot all be
    # backed by the file; refuse before even the meta model is built (a
    # layer count of a billion would build a billion module objects).
    numel = sum(t.numel() for t in state.values())
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and value > max(numel, 1):
            raise ValueError(
                f"build_model: model_config declares {f.name}={value}, more than the "
                f"{numel} numbers stored in the checkpoint"
            )
    layers = sum(getattr(config, n, 0) for n in ("num_encoder_layers", "num_decoder_layers"))
    if layers > len(state):
        raise ValueError(
            f"build_model: model_config declares {layers} layers but the checkpoint "
            f"holds only {len(state)} tensors"
        )
    with torch.device("meta"):
        shell = model_cls(config)
    expected = shell.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        what = f"lacks {missing[0]!r}" if missing else f"has {unexpected[0][:100]!r}"
        raise ValueError(
            f"build_model: model_state does not match model_config: it {what} "
            f"({len(missing)} missing, {len(unexpected)} unexpected tensors)"
        )
    for key, tensor in expected.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise ValueError(
                f"build_model: model_state[{key!r}] has shape {tuple(state[key].shape)} but "
                f"model_config implies {tuple(tensor.shape)}"
            )
    needed = _tensor_bytes([*shell.parameters(), *shell.buffers()])
    if needed > stored + MAX_UNSTORED_BYTES:
        raise ValueError(
            f"build_model: the model would need {needed / 2**20:,.0f} MiB but the "
            f"checkpoint stores {stored / 2**20:,.0f} MiB of tensors; refusing to allocate"
        )


def build_model(
    ckpt: dict | str | os.PathLike,
    map_location: str | torch.device = "cpu",
    *,
    average: bool = True,
) -> nn.Module:
    """Rebuild the model stored in a checkpoint (a dict or a path), weights
    loaded, in ``eval()`` mode. If the run kept a moving average of the
    weights, the model gets the average (what ``fit`` validated and
    returned); ``average=False`` loads the weights as trained.

    Only the package's own models are rebuilt (:data:`MODEL_CLASSES`); any
    other class name, a config with unknown fields or non-plain values, or
    sizes that do not match the stored tensors raise ``ValueError`` (one
    line) before any memory is allocated for the model. To load a model of
    your own, build it and call ``model.load_state_dict(ckpt["model_state"])``
    (the weights as trained).
    """
    if not isinstance(ckpt, dict):
        ckpt = load_checkpoint(ckpt, map_location)
    ckpt = _current_format(ckpt, "build_model: the checkpoint")
    model_cls, config_cls = _classes(ckpt)
    config = _config(config_cls, ckpt.get("model_config"))
    state = ckpt.get("model_state")
    if not isinstance(state, dict):
        raise ValueError("build_model: the checkpoint holds no model_state dict")
    _check_sizes(model_cls, config, state)
    _check_finite(state, "model_state")
    model = model_cls(config)
    model.load_state_dict(state)
    if average and ckpt.get("average") is not None:
        _load_average(model, ckpt["average"])
    return model.to(map_location).eval()


def _check_finite(state: dict, what: str) -> None:
    """Refuse weights that are NaN or infinite (a model of them translates
    every sentence to nothing)."""
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"build_model: {what}[{str(name)[:100]!r}] holds {bad:,} of "
                f"{tensor.numel():,} values that are not finite (NaN or inf); the weights "
                "are broken (a run that diverged, or a damaged file)"
            )


def _load_average(model: nn.Module, stored: Any) -> None:
    """Copy a stored weight average (an ``ExponentialMovingAverage.state_dict()``)
    into ``model``'s parameters."""
    try:
        average = ExponentialMovingAverage(model, stored["decay"])
        average.load_state_dict(stored)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"build_model: the checkpoint's weight average does not fit the model ({reason})"
        ) from None
    _check_finite(average.averaged, "average")
    average.copy_to(model)
