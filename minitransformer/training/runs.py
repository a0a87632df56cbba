"""A training run's folder, and every file the command line writes.

A run folder holds :data:`RUN_FILES`: the checkpoints, the vocabularies,
the history and ``run.json`` (languages, data settings, both configs). This
module is the one place that decides whether a path may be written:

- :func:`check_run_folder`: ``train --out`` refuses an existing run unless
  told to continue it (``--resume``) or replace it (``--overwrite``);
- :func:`lock_run`: one ``train`` at a time in a folder (an exclusive
  ``flock`` on ``RUN/.lock``), so a second one fails at once;
- :func:`output_target`: any other file written (``evaluate --output``)
  is never a file of a run, never a folder, an existing file only with
  ``--overwrite``, and a symbolic link is written through, not replaced;
- :func:`write_text` / :func:`write_json`: atomic writes (a temporary file
  renamed over the old one) that keep an existing file's mode.

It also reads and checks ``run.json`` (:func:`read_run_info`), compares a
run's stored configs with the ones a resumed run would build
(:func:`config_differences`), and refuses a model whose training state does
not fit in memory (:func:`check_memory`). Errors are :class:`RunError`, one
line each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from .options import DEFAULT_PRESET, field_default

try:
    import fcntl
except ImportError:  # Windows: no lock (one train per folder is then the user's care)
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunError", "RUN_FILES", "LOCK_FILE", "check_run_folder", "lock_run",
           "output_target", "write_text", "write_json", "read_run_info",
           "config_differences", "check_resume", "RESUME_KEYS", "check_memory",
           "checkpoint_file", "recorded_languages"]

#: The files a training run writes in its folder.
RUN_FILES = ("run.json", "last.pt", "best.pt", "history.json", "src_vocab.json",
             "tgt_vocab.json", "tokenizer.model")
LOCK_FILE = ".lock"


class RunError(ValueError):
    """A path that may not be written, or a run that does not match: one line."""


def _holds_run(folder: Path) -> bool:
    return any((folder / name).exists() for name in RUN_FILES)


def check_run_folder(out: Path, resume: bool, overwrite: bool) -> list[Path]:
    """Check ``train --out`` before anything is written: a folder (or none
    yet) that can be written, holding no run unless ``resume`` or
    ``overwrite``. Returns the old run's files that ``overwrite`` replaces."""
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} exists and is not a folder")
    if resume and overwrite:
        raise RunError("--resume continues the run in --out and --overwrite replaces it: "
                       "choose one")
    existing = [out / name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "last.pt").is_file():
        raise RunError(f"--resume: there is no {out / 'last.pt'} to continue from")
    if existing and not (resume or overwrite):
        names = ", ".join(p.name for p in existing)
        raise RunError(f"--out {out} already holds a run ({names}); add --resume to continue "
                       "it or --overwrite to replace it")
    folder = out
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise RunError(f"--out {out}: {folder} is not a folder")
    try:  # can we write there? (a temporary file, removed at once)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise RunError(f"--out {out} cannot be written ({err.strerror})") from None
    return existing if overwrite else []


@contextlib.contextmanager
def lock_run(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on the run folder ``out`` (created if needed)
    for the ``with`` block; another process holding it makes this fail at
    once with a :class:`RunError`. Folders created here are removed again if
    the block fails before writing anything else into them."""
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} exists and is not a folder")
    created = [p for p in (out, *out.parents) if not p.exists()]
    if created and not created[-1].parent.is_dir():
        raise RunError(f"--out {out}: {created[-1].parent} is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = out / LOCK_FILE
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise RunError(f"--out {out} cannot be written ({err.strerror})") from None
    locked = ok = False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise RunError(f"--out {out} is in use by another train (pid {holder}); "
                               "wait for it to end or choose another --out") from None
        locked = True
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
        ok = True
    finally:
        if locked and not ok and created and not _holds_run(out):
            lock.unlink(missing_ok=True)
            for folder in created:  # deepest first
                with contextlib.suppress(OSError):
                    folder.rmdir()
        os.close(fd)  # releases the lock


def output_target(path: Path, overwrite: bool, protected: Path | None = None,
                  what: str = "--output") -> tuple[Path, str | None]:
    """Decide whether ``path`` may be written: ``(the file to write, a note
    to print or None)``. A symbolic link is written through (the note says
    so); refused: a folder, a file of a training run, ``protected`` (e.g. the
    checkpoint being read), an existing file without ``overwrite``, a folder
    that does not exist or cannot be written."""
    target = Path(os.path.realpath(path))
    note = f"{what} {path} is a symbolic link: writing to {target}" if path.is_symlink() else None
    if target.is_dir():
        raise RunError(f"{what} {path} is a folder")
    if protected is not None and target == Path(os.path.realpath(protected)):
        raise RunError(f"{what} {path} is the checkpoint being evaluated")
    if (target.name in RUN_FILES or target.name == LOCK_FILE) and _holds_run(target.parent):
        raise RunError(f"{what} {path} is a file of the training run in {target.parent}; "
                       "choose another file")
    if target.exists() and not overwrite:
        raise RunError(f"{what} {path} exists; add --overwrite to replace it")
    if not target.parent.is_dir():
        raise RunError(f"{what} {path}: {target.parent} is not an existing folder")
    if target.exists() and not os.access(target, os.W_OK):
        raise RunError(f"{what} {path} cannot be written (permission denied)")
    if not (target.exists() or os.access(target.parent, os.W_OK | os.X_OK)):
        raise RunError(f"{what} {path} cannot be written (its folder is read-only)")
    return target, note


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file beside
    it, renamed over it, so a failure leaves an old file as it was. An
    existing file keeps its mode; a new one gets the umask's. A path that is
    not a regular file (a device, a pipe) is written in place."""
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else _new_file_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any, indent: int | None = None) -> None:
    """:func:`write_text` of ``value`` as JSON."""
    write_text(path, json.dumps(value, indent=indent))


def read_run_info(folder: Path, languages: tuple[str, ...]) -> dict:
    """``folder/run.json`` as a dict (``{}`` if there is none), checked: a
    JSON object whose ``src_lang`` / ``tgt_lang``, if given, are in ``languages``."""
    file = folder / "run.json"
    if not file.is_file():
        return {}
    try:
        info = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(f"cannot read {file}: {err}") from None
    if not isinstance(info, dict):
        raise RunError(f"{file} holds a JSON {type(info).__name__}, expected an object "
                       "(a run description written by train)")
    for key in ("src_lang", "tgt_lang"):
        if key in info and info[key] not in languages:
            raise RunError(f"{file}: {key} {info[key]!r} is not a known language "
                           f"(expected one of {', '.join(languages)})")
    if not isinstance(info.get("data", {}), dict):
        raise RunError(f"{file}: 'data' is not an object")
    return info


def checkpoint_file(path: Path) -> Path:
    """The checkpoint a path names: a file, or in a training folder ``best.pt``,
    else ``last.pt``."""
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / name).is_file():
                return path / name
        raise RunError(f"no checkpoint in {path} (expected best.pt or last.pt)")
    if not path.exists():
        raise RunError(f"checkpoint {path} does not exist")
    return path


def recorded_languages(file: Path, recorded: Any, languages: tuple[str, ...]) -> dict:
    """``{"src": .., "tgt": ..}`` of checkpoint ``file``: ``recorded`` (what
    it holds, None in older checkpoints), checked against ``run.json`` beside
    it, which older checkpoints rely on alone; ``{}`` if neither says."""
    info = read_run_info(file.parent, languages)
    beside = {"src": info["src_lang"], "tgt": info["tgt_lang"]} if "src_lang" in info else {}
    if recorded is None:
        return beside
    if (not isinstance(recorded, dict) or set(recorded) != {"src", "tgt"}
            or not set(recorded.values()) <= set(languages)):
        raise RunError(f"cannot use checkpoint {file}: its languages {recorded!r} are not a "
                       f"pair of {', '.join(languages)}")
    if beside and beside != recorded:
        raise RunError(f"checkpoint {file} translates {recorded['src']}→{recorded['tgt']} but "
                       f"{file.parent / 'run.json'} says {beside['src']}→{beside['tgt']}")
    return dict(recorded)


def config_differences(stored: Mapping[str, Any] | None, wanted: Any,
                       names: Mapping[str, str] | None = None,
                       ignore: frozenset[str] = frozenset()) -> list[str]:
    """The fields in which the config dict ``stored`` (a run's) differs from
    the dataclass ``wanted``, as ``"NAME VALUE (run: STORED)"``. A field an
    older run lacks counts as its default; a field the run has and the class
    lacks is listed too. ``names`` maps fields to what to call them (flags)."""
    names = names or {}
    stored = dict(stored or {})
    out = []
    for f in dataclasses.fields(wanted):
        if f.name in ignore:
            continue
        old = stored.pop(f.name) if f.name in stored else field_default(f)
        new = getattr(wanted, f.name)
        if (list(old) if isinstance(old, (tuple, list)) else old) != (
                list(new) if isinstance(new, (tuple, list)) else new):
            out.append(f"{names.get(f.name, f.name)} {new} (run: {old})")
    out += [f"{names.get(k, k)} unknown here (run: {v})" for k, v in stored.items()
            if k not in ignore]
    return out


#: What a checkpoint needs to be resumed from (what ``train`` saves).
RESUME_KEYS = ("model_config", "vocabs", "optimizer_state", "train_state", "rng")


#: Data settings of a run whose ``run.json`` does not record them (written
#: before they existed): what every run had then.
DATA_BEFORE_RECORDED: dict[str, Any] = {"target_pieces": "all"}


def check_resume(out: Path, ckpt: Mapping[str, Any], now: Mapping[str, Any], model_config: Any,
                 names: Mapping[str, str], languages: tuple[str, ...]) -> None:
    """Check that the run in ``out`` (its ``last.pt``, loaded as ``ckpt``, and
    its ``run.json``) is the one ``now`` describes: the dataset and languages,
    the ``--preset`` (a run that records none had the default's parts), the
    data settings (``now["data"]``) and every field of ``model_config`` (a
    field an older run lacks counts as its default). One line names every
    difference, by ``names`` (the flags)."""
    file = out / "last.pt"
    for key in RESUME_KEYS:
        if not ckpt.get(key):
            raise RunError(f"cannot resume from {file}: it holds no {key} (it was not saved "
                           "by train)")
    info = read_run_info(out, languages)
    differ = []
    run = {k: info.get(k, now[k]) for k in ("dataset", "src_lang", "tgt_lang")}
    if any(run[k] != now[k] for k in run):
        differ.append(f"the run translates {run['src_lang']}→{run['tgt_lang']} "
                      f"({run['dataset']}), not {now['src_lang']}→{now['tgt_lang']} "
                      f"({now['dataset']})")
    preset = {k: d.get("preset", DEFAULT_PRESET) for k, d in (("run", info), ("now", now))}
    if preset["run"] != preset["now"]:
        differ.append(f"--preset {preset['now']} (run: {preset['run']})")
    stored = {**DATA_BEFORE_RECORDED, **info.get("data", {})}
    differ += [f"--{k.replace('_', '-')} {v} (run: {stored[k]})"
               for k, v in now["data"].items() if stored.get(k, v) != v]
    differ += config_differences(ckpt["model_config"], model_config, names)
    if differ:
        raise RunError(f"--resume: the run in {out} differs: {'; '.join(differ)}; resume with "
                       "the run's options")


def _available_memory(device: torch.device) -> int | None:
    """Bytes free for tensors on ``device`` (None when unknown)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def check_memory(model: torch.nn.Module, device: torch.device) -> None:
    """Refuse a model (built on the ``meta`` device, where nothing is
    allocated) whose training state cannot fit in memory on ``device``:
    weights, gradients, Adam's two moments and the weight average, 4 bytes
    each per parameter."""
    n = sum(p.numel() for p in model.parameters())
    needed = 5 * 4 * n
    available = _available_memory(device)
    if available is not None and needed > available:
        raise RunError(
            f"the model has {n / 1e6:,.0f} M parameters: training it needs about "
            f"{needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB free on "
            f"{device}; choose smaller --d-model, --d-ff or fewer layers"
        )
