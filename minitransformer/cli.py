"""The command line: train, translate and evaluate a Transformer translator.

    python -m minitransformer train --dataset multi30k --minutes 10 --out runs/de-en
    echo "Ein Mann fährt Fahrrad." | python -m minitransformer translate --checkpoint runs/de-en
    python -m minitransformer evaluate --checkpoint runs/de-en --split test_2016_flickr --beam 4

``train``'s defaults are the book's CPU configuration, the one chapter 10
trains (:mod:`minitransformer.training.presets`): an encoder-decoder
Transformer (Vaswani et al. 2017), pre-LN, trained with Adam, the warm-up
schedule and label smoothing, with a moving average of the weights as the
result. It trains until its time budget (``--minutes``) is spent,
validates, saves ``last.pt`` / ``best.pt``
(:mod:`minitransformer.training.checkpoint`), the vocabularies, the history
and ``run.json`` in ``--out``, and prints the validation BLEU.

``translate`` reads one sentence a line on stdin and writes exactly one
detokenised translation a line on stdout (an empty line gives an empty line),
so outputs stay aligned with references. ``evaluate`` translates a Multi30k
split and prints sacreBLEU's cased corpus BLEU (the figure papers report),
the lower-cased BLEU and chrF, each with its signature
(:func:`minitransformer.metrics.corpus_scores`).

Errors (bad arguments, a missing or corrupt checkpoint, a missing corpus)
print one message on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .data import (
    MULTI30K_LANGS,
    MULTI30K_SPLITS,
    TOKENIZER_KINDS,
    CorpusError,
    DatasetNotFoundError,
    SubwordTokenizer,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
    tokenizer_from_dict,
)
from .decoding import MAX_ROWS, translate
from .metrics import corpus_scores
from .model import Transformer, TransformerConfig
from .training import (
    AMP_MODES,
    TrainConfig,
    TrainingDivergedError,
    fit,
    pick_device,
    precision,
)
from .training.checkpoint import CheckpointWriteError, build_model, load_checkpoint
from .training.presets import CPU_DATA, CPU_MODEL, CPU_TOKENIZERS, CPU_TRAINING, positions_for
from .training.resume_checks import ResumeMismatchError

__all__ = ["main", "build_parser", "checkpoint_file"]

PROG = "python -m minitransformer"


class CLIError(Exception):
    """An error to report in one line (exit status 2), not as a traceback."""


# --------------------------------------------------------------------------- argument types


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value} (not finite)")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**64), got {value}")
    return value


def _beam(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_ROWS:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_ROWS} (the rows decoded at once), got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {value}")
    return value


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of the three commands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train, use and evaluate the minitransformer translator (Multi30k).",
        epilog="Run '%(prog)s COMMAND --help' for the options of a command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    m, t, k = CPU_MODEL, CPU_TRAINING, CPU_TOKENIZERS

    # ---- train
    tr = sub.add_parser(
        "train",
        help="train a Transformer on a translation corpus",
        description="Train an encoder-decoder Transformer until the time budget is spent, "
        "then validate and save checkpoints, vocabularies and the history in --out. "
        "Defaults: the book's CPU configuration.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    tr.add_argument("--dataset", choices=["multi30k"], default="multi30k", help="the corpus")
    tr.add_argument("--out", required=True, type=Path, help="folder for checkpoints and logs")
    tr.add_argument("--src-lang", choices=MULTI30K_LANGS, default="de", help="source language")
    tr.add_argument("--tgt-lang", choices=MULTI30K_LANGS, default="en", help="target language")
    tr.add_argument("--data-root", type=Path, default=None,
                    help="folder holding the raw files (else $MINITRANSFORMER_DATA/multi30k, "
                    "the user cache, or a download)")
    tr.add_argument("--no-download", action="store_true", help="never use the network")
    budget = tr.add_argument_group("budget (training stops at the first one reached)")
    budget.add_argument("--minutes", type=_positive_float, default=10.0,
                        help="wall-clock minutes of training")
    budget.add_argument("--epochs", type=_positive_int, default=None, help="passes over the data")
    budget.add_argument("--max-steps", type=_positive_int, default=None, help="optimiser steps")
    model = tr.add_argument_group("model")
    model.add_argument("--d-model", type=_positive_int, default=m["d_model"], help="model width")
    model.add_argument("--heads", type=_positive_int, default=m["num_heads"],
                       help="attention heads")
    model.add_argument("--encoder-layers", type=_positive_int, default=m["num_encoder_layers"])
    model.add_argument("--decoder-layers", type=_positive_int, default=m["num_decoder_layers"])
    model.add_argument("--d-ff", type=_positive_int, default=m["d_ff"],
                       help="feed-forward inner width")
    model.add_argument("--dropout", type=_fraction, default=m["dropout"])
    model.add_argument("--tie-output", action=argparse.BooleanOptionalAction,
                       default=m["tie_output"],
                       help="the output projection reuses the target embedding matrix")
    model.add_argument("--share-embeddings", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="one embedding table for source and target (needs --tokenizer "
                       "subword, whose vocabulary both languages share; None: "
                       f"{'on' if m['share_embeddings'] else 'off'} with subwords, off with "
                       "words)")
    model.add_argument("--post-ln", action="store_true", default=not m["norm_first"],
                       help="LayerNorm after each residual add, as in the paper (default: pre-LN)")
    opt = tr.add_argument_group("data and optimisation")
    opt.add_argument("--tokenizer", choices=TOKENIZER_KINDS, default=k["kind"],
                     help="words: lower-cased words per language, rare ones become <unk>; "
                     "subword: one cased SentencePiece BPE model for both languages, no "
                     "unknown words")
    opt.add_argument("--min-freq", type=_positive_int, default=k["min_freq"],
                     help="rarer words become <unk> (--tokenizer words)")
    opt.add_argument("--vocab-size", type=_positive_int, default=k["vocab_size"],
                     help="pieces of the subword model (--tokenizer subword)")
    opt.add_argument("--max-len", type=_positive_int, default=CPU_DATA["max_len"],
                     help="drop training pairs with a side longer than this (tokens)")
    opt.add_argument("--max-tokens", type=_positive_int, default=CPU_DATA["max_tokens"],
                     help="padded source + target tokens per batch")
    opt.add_argument("--lr", type=_positive_float, default=t["lr"], help="peak learning rate")
    opt.add_argument("--schedule", choices=["noam", "constant", "linear"],
                     default=t["schedule"],
                     help="after warm-up: decay as 1/sqrt(step) (noam), stay flat (constant) "
                     "or fall linearly to 0 at the end of the budget (linear)")
    opt.add_argument("--warmup", type=int, default=t["warmup_steps"], help="warm-up steps")
    opt.add_argument("--label-smoothing", type=_fraction, default=t["label_smoothing"])
    opt.add_argument("--ema", type=_fraction, default=t["ema_decay"] or 0.0, metavar="DECAY",
                     help="validate, save and evaluate a moving average of the weights with "
                     "this decay (0 = the weights as trained)")
    opt.add_argument("--eval-every", type=_positive_int, default=None,
                     help="validate every N steps (default: after each epoch)")
    opt.add_argument("--seed", type=_seed, default=0)
    opt.add_argument("--device", default="auto", help="'auto' (CUDA, MPS, CPU) or a torch device")
    opt.add_argument("--amp", choices=AMP_MODES, default=t.get("amp", "auto"),
                     help="bf16 autocast: 'native' where the hardware computes bf16 (CUDA "
                     "GPUs with bf16, CPUs with AVX512_BF16 or AMX), 'auto' on such GPUs "
                     "only, 'bf16' always, 'off' never")
    opt.add_argument("--resume", action="store_true",
                     help="continue the run in OUT from OUT/last.pt (same languages, data, "
                     "vocabularies and model options)")
    opt.add_argument("--overwrite", action="store_true",
                     help="replace the run already in OUT (without it, train refuses an "
                     "existing run)")
    opt.add_argument("--no-bleu", action="store_true",
                     help="skip the validation BLEU printed at the end")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")

    # ---- translate
    tl = sub.add_parser(
        "translate",
        help="translate stdin to stdout, one sentence a line",
        description="Read one source sentence a line on stdin; write exactly one "
        "detokenised translation a line on stdout (an empty line gives an empty line).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _decoding_args(tl)

    # ---- evaluate
    ev = sub.add_parser(
        "evaluate",
        help="BLEU of a checkpoint on a Multi30k split",
        description="Translate a Multi30k split and print sacreBLEU's corpus BLEU "
        "(cased, the figure papers report), lower-cased BLEU and chrF, each with its "
        "signature.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _decoding_args(ev)
    ev.add_argument("--split", choices=MULTI30K_SPLITS, default="test_2016_flickr")
    ev.add_argument("--data-root", type=Path, default=None,
                    help="folder holding the raw files (default: as for train)")
    ev.add_argument("--no-download", action="store_true", help="never use the network")
    ev.add_argument("--limit", type=_positive_int, default=None,
                    help="evaluate on the first N sentences only")
    ev.add_argument("--output", type=Path, default=None,
                    help="also write the translations to this file, one a line")
    return parser


def _decoding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, type=Path,
                   help="a checkpoint file, or a training folder (best.pt, else last.pt)")
    p.add_argument("--beam", type=_beam, default=1,
                   help="beam size (1 = greedy search)")
    p.add_argument("--length-penalty", type=_finite_float, default=0.6,
                   help="GNMT length penalty alpha of beam search")
    p.add_argument("--batch-size", type=_positive_int, default=128,
                   help="sentences decoded together")
    p.add_argument("--device", default="auto", help="'auto' (CUDA, MPS, CPU) or a torch device")


# --------------------------------------------------------------------------- helpers


def checkpoint_file(path: Path) -> Path:
    """The checkpoint a path names: a file, or in a training folder ``best.pt``,
    else ``last.pt``. Raises :class:`CLIError` if there is none."""
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / name).is_file():
                return path / name
        raise CLIError(f"no checkpoint in {path} (expected best.pt or last.pt)")
    if not path.exists():
        raise CLIError(f"checkpoint {path} does not exist")
    return path


def _load(path: Path, device_name: str):
    """(model in eval mode, src tokenizer, tgt tokenizer, run info) from a checkpoint."""
    file = checkpoint_file(path)
    try:
        device = pick_device(device_name)
    except RuntimeError as err:
        raise CLIError(f"bad --device {device_name!r}: {err}") from None
    try:
        ckpt = load_checkpoint(file, map_location="cpu")
        model = build_model(ckpt, map_location="cpu")
        vocabs = ckpt.get("vocabs") or {}
        src_vocab = tokenizer_from_dict(vocabs["src"])
        tgt_vocab = tokenizer_from_dict(vocabs["tgt"])
    except FileNotFoundError as err:
        raise CLIError(str(err)) from None
    except KeyError as err:
        raise CLIError(f"{file} is not a translation checkpoint (missing {err})") from None
    except (ValueError, TypeError, RuntimeError, AttributeError) as err:
        raise CLIError(f"cannot use checkpoint {file}: {err}") from None
    sizes = (getattr(model.config, "src_vocab_size", None),
             getattr(model.config, "tgt_vocab_size", None))
    if sizes != (len(src_vocab), len(tgt_vocab)):
        raise CLIError(
            f"cannot use checkpoint {file}: its vocabularies have {len(src_vocab)} / "
            f"{len(tgt_vocab)} tokens but its model expects {sizes[0]} / {sizes[1]}"
        )
    model = model.to(device)
    info_file = file.parent / "run.json"
    try:
        info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    except (OSError, json.JSONDecodeError) as err:
        raise CLIError(f"cannot read {info_file}: {err}") from None
    return model, src_vocab, tgt_vocab, info


def _load_pairs(split: str, src: str, tgt: str, root: Path | None, download: bool):
    if src == tgt:
        raise CLIError(f"source and target language are both {src!r}")
    try:
        return load_multi30k(split, src, tgt, root=root, download=download)
    except (DatasetNotFoundError, CorpusError) as err:
        raise CLIError(str(err)) from None


def _one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs (line breaks included)
    become one space and control characters (e.g. the ESC of a terminal
    escape sequence stored in a vocabulary) are dropped."""
    text = " ".join(text.split())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cc")


def _translate(model, sentences: list[str], src_vocab, tgt_vocab, args) -> list[str]:
    out = translate(
        model, sentences, src_vocab, tgt_vocab, beam_size=args.beam,
        batch_size=args.batch_size, length_penalty=args.length_penalty,
    )
    # One line per input line, whatever the model produced.
    return [_one_line(line) for line in out]


# --------------------------------------------------------------------------- commands


#: The files a training run writes in its folder.
RUN_FILES = ("run.json", "last.pt", "best.pt", "history.json", "src_vocab.json", "tgt_vocab.json",
             "tokenizer.model")


def _write_json(path: Path, value: Any, indent: int | None = None) -> None:
    """Write ``value`` as JSON atomically (temporary file, then rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=indent)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_out(out: Path, resume: bool, overwrite: bool) -> list[Path]:
    """Check ``--out`` before anything is written: a folder (or none yet)
    that can be written, holding no run unless ``--resume`` or
    ``--overwrite``. Returns the old run's files that ``--overwrite`` replaces."""
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} exists and is not a folder")
    if resume and overwrite:
        raise CLIError("--resume continues the run in --out and --overwrite replaces it: "
                       "choose one")
    existing = [out / name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "last.pt").is_file():
        raise CLIError(f"--resume: there is no {out / 'last.pt'} to continue from")
    if existing and not (resume or overwrite):
        names = ", ".join(p.name for p in existing)
        raise CLIError(f"--out {out} already holds a run ({names}); add --resume to continue "
                       "it or --overwrite to replace it")
    folder = out
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"--out {out}: {folder} is not a folder")
    try:  # can we write there? (a temporary file, removed at once)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise CLIError(f"--out {out} cannot be written ({err.strerror})") from None
    return existing if overwrite else []


def _model_config(args: argparse.Namespace, src_size: int, tgt_size: int) -> TransformerConfig:
    """The :class:`TransformerConfig` that ``train``'s model flags ask for."""
    return TransformerConfig(
        src_vocab_size=src_size, tgt_vocab_size=tgt_size,
        d_model=args.d_model, num_heads=args.heads,
        num_encoder_layers=args.encoder_layers, num_decoder_layers=args.decoder_layers,
        d_ff=args.d_ff, dropout=args.dropout, max_len=positions_for(args.max_len),
        norm_first=not args.post_ln, tie_output=args.tie_output,
        share_embeddings=_share_embeddings(args),
    )


def _share_embeddings(args: argparse.Namespace) -> bool:
    """``--share-embeddings`` as given, else the preset's with subwords (word
    vocabularies differ between the languages, so they cannot share)."""
    if args.share_embeddings is not None:
        return args.share_embeddings
    return CPU_MODEL["share_embeddings"] and args.tokenizer == "subword"


#: Model config fields → the train option that sets them (for --resume's checks).
_MODEL_OPTIONS = {"d_model": "--d-model", "num_heads": "--heads",
                  "num_encoder_layers": "--encoder-layers",
                  "num_decoder_layers": "--decoder-layers", "d_ff": "--d-ff",
                  "dropout": "--dropout", "max_len": "--max-len", "norm_first": "--post-ln",
                  "tie_output": "--tie-output", "share_embeddings": "--share-embeddings"}


def _data_settings(args: argparse.Namespace) -> dict:
    return {"tokenizer": args.tokenizer, "min_freq": args.min_freq,
            "vocab_size": args.vocab_size, "max_len": args.max_len,
            "max_tokens": args.max_tokens, "seed": args.seed}


def _check_resume(out: Path, args: argparse.Namespace, src_vocab, tgt_vocab):
    """The model config of the run to continue, after checking that it is the
    same run: languages, data settings, vocabularies (built from the data on
    disk now) and model options; and that ``last.pt`` can be resumed from."""
    file = out / "last.pt"
    try:
        ckpt = load_checkpoint(file)
    except ValueError as err:
        raise CLIError(f"cannot resume: {err}") from None
    for key in ("model_config", "vocabs", "optimizer_state", "train_state", "rng"):
        if not ckpt.get(key):
            raise CLIError(f"cannot resume from {file}: it holds no {key} (it was not saved "
                           "by train)")
    info_file = out / "run.json"
    try:
        info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    except (OSError, json.JSONDecodeError) as err:
        raise CLIError(f"cannot read {info_file}: {err}") from None
    pair = (info.get("src_lang", args.src_lang), info.get("tgt_lang", args.tgt_lang))
    if pair != (args.src_lang, args.tgt_lang) or info.get("dataset", args.dataset) != args.dataset:
        raise CLIError(f"--resume: the run in {out} translates {pair[0]}→{pair[1]} "
                       f"({info.get('dataset')}), not {args.src_lang}→{args.tgt_lang} "
                       f"({args.dataset})")
    for key, value in _data_settings(args).items():
        stored = info.get("data", {}).get(key, value)
        if stored != value:
            raise CLIError(f"--resume: --{key.replace('_', '-')} {value} differs from the "
                           f"run's {stored}")
    try:
        stored_vocabs = [tokenizer_from_dict(ckpt["vocabs"].get(side)) for side in ("src", "tgt")]
    except (TypeError, ValueError) as err:
        raise CLIError(f"cannot resume from {file}: {err}") from None
    if stored_vocabs != [src_vocab, tgt_vocab]:
        raise CLIError(f"--resume: the training data give other vocabularies than the run in "
                       f"{out} (other corpus files?)")
    stored = ckpt["model_config"]
    wanted = _model_config(args, len(src_vocab), len(tgt_vocab)).to_dict()
    for key, option in _MODEL_OPTIONS.items():
        if stored.get(key) != wanted[key]:
            raise CLIError(f"--resume: {option} gives {key}={wanted[key]} but the run has "
                           f"{stored.get(key)}; resume with the run's options")
    try:
        return TransformerConfig(**stored)
    except (TypeError, ValueError) as err:
        raise CLIError(f"cannot resume from {file}: {err}") from None


def _available_memory(device) -> int | None:
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


def _check_memory(model_config, device) -> None:
    """Refuse a model whose training state cannot fit in memory (counted on
    the ``meta`` device, where nothing is allocated): weights, gradients,
    Adam's two moments and the weight average, 4 bytes each per parameter."""
    with torch.device("meta"):
        shell = Transformer(model_config)
    n = sum(p.numel() for p in shell.parameters())
    needed = 5 * 4 * n
    available = _available_memory(device)
    if available is not None and needed > available:
        raise CLIError(
            f"the model has {n / 1e6:,.0f} M parameters: training it needs about "
            f"{needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB free on "
            f"{device}; choose smaller --d-model, --d-ff or fewer layers"
        )


def _train_config(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` that ``train``'s flags ask for."""
    try:
        return TrainConfig(
            lr=args.lr, schedule=args.schedule, warmup_steps=args.warmup,
            label_smoothing=args.label_smoothing, ema_decay=args.ema or None, epochs=args.epochs,
            max_steps=args.max_steps, max_minutes=args.minutes, eval_every=args.eval_every,
            seed=args.seed, device=args.device, amp=args.amp, checkpoint_dir=str(args.out),
            resume=args.resume,
        )
    except ValueError as err:
        raise CLIError(str(err)) from None


def _cmd_train(args: argparse.Namespace) -> int:
    # Everything is checked before anything is written.
    out: Path = args.out
    replaced = _check_out(out, args.resume, args.overwrite)
    if args.d_model % args.heads:
        raise CLIError(f"--d-model ({args.d_model}) must be divisible by --heads ({args.heads})")
    if args.warmup < 0:
        raise CLIError(f"--warmup must be >= 0, got {args.warmup}")
    if args.share_embeddings and args.tokenizer != "subword":
        raise CLIError("--share-embeddings needs --tokenizer subword (the word vocabularies "
                       "of the two languages differ)")
    try:
        device = pick_device(args.device)
    except RuntimeError as err:
        raise CLIError(f"bad --device {args.device!r}: {err}") from None
    config = _train_config(args)
    download = not args.no_download
    t0 = time.perf_counter()
    train_pairs = _load_pairs("train", args.src_lang, args.tgt_lang, args.data_root, download)
    valid_pairs = _load_pairs("val", args.src_lang, args.tgt_lang, args.data_root, download)
    try:
        src_vocab, tgt_vocab = build_tokenizers(
            train_pairs, args.tokenizer, min_freq=args.min_freq, vocab_size=args.vocab_size
        )
    except ValueError as err:  # e.g. a subword vocabulary larger than the corpus allows
        raise CLIError(str(err)) from None
    if args.resume:
        model_config = _check_resume(out, args, src_vocab, tgt_vocab)
    else:
        model_config = _model_config(args, len(src_vocab), len(tgt_vocab))
    train_ex = encode_pairs(train_pairs, src_vocab, tgt_vocab, max_len=args.max_len)
    valid_ex = encode_pairs(valid_pairs, src_vocab, tgt_vocab)
    if not train_ex or not valid_ex:
        raise CLIError("no usable training or validation pairs")
    train_batches = TokenBatcher(train_ex, args.max_tokens, shuffle=True, seed=args.seed)
    valid_batches = list(TokenBatcher(valid_ex, args.max_tokens, shuffle=False))
    _check_memory(model_config, device)
    torch.manual_seed(args.seed)
    try:
        model = Transformer(model_config)
    except (MemoryError, RuntimeError) as err:
        if not _out_of_memory(err):
            raise
        raise CLIError("out of memory while building the model; choose smaller sizes") from None

    # Checks passed: now write.
    subword = isinstance(tgt_vocab, SubwordTokenizer)
    vocabularies = (f"one subword vocabulary of {len(tgt_vocab):,} pieces" if subword else
                    f"vocabularies {len(src_vocab):,} / {len(tgt_vocab):,} words")
    print(
        f"{args.dataset} {args.src_lang}→{args.tgt_lang}: {len(train_ex):,} training pairs, "
        f"{len(valid_ex):,} validation pairs, {vocabularies}, {len(train_batches)} batches "
        f"an epoch (prepared in {time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    if args.resume:
        print(f"resuming from {out / 'last.pt'}")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.1f} M parameters; training for at most "
          f"{args.minutes:g} minutes on {device} in {precision(device, args.amp)[1]}", flush=True)
    for old in replaced:
        old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    if subword:  # also a plain SentencePiece model file, for other tools
        tgt_vocab.save(out / "tokenizer.model")
    else:
        src_vocab.vocab.save(out / "src_vocab.json")
        tgt_vocab.vocab.save(out / "tgt_vocab.json")
    _write_json(out / "run.json", {
        "dataset": args.dataset, "src_lang": args.src_lang, "tgt_lang": args.tgt_lang,
        "lowercase": not subword, "data": _data_settings(args),
        "model_config": model_config.to_dict(), "train_config": config.to_dict(),
    }, indent=2)
    try:
        history = fit(
            model, train_batches, valid_batches, config, progress=not args.quiet,
            vocabs={"src": src_vocab, "tgt": tgt_vocab},
        )
    except TrainingDivergedError as err:  # --lr too high: stopped before saving NaN weights
        raise CLIError(f"{err} (--lr)") from None
    except (ResumeMismatchError, CheckpointWriteError) as err:  # a crafted last.pt; disk full
        raise CLIError(str(err)) from None
    except (MemoryError, RuntimeError) as err:
        if not _out_of_memory(err):
            raise
        raise CLIError(f"out of memory while training; the last checkpoint in {out} is kept; "
                       "try a smaller --max-tokens or model") from None
    _write_json(out / "history.json", history.to_dict())
    steps = history.step[-1] if history.step else 0
    valid = f"{history.valid_loss[-1]:.3f}" if history.valid_loss else "n/a"
    print(f"stopped ({history.stop_reason}) after {steps} steps; "
          f"validation cross-entropy {valid} nats/token; "
          f"{history.tokens_per_second:,.0f} tokens/s; checkpoints in {out}", flush=True)
    if not args.no_bleu:
        model.eval()
        hyps = translate(model, [s for s, _ in valid_pairs], src_vocab, tgt_vocab)
        print("validation, greedy:")
        _print_scores(hyps, [t for _, t in valid_pairs])
    return 0


_LINE_END = re.compile(r"\r\n|\r|\n")


def _input_lines(stream):
    """The lines of ``stream`` without their ends, which may be ``\\n``,
    ``\\r\\n`` or a lone ``\\r``; bytes that are not UTF-8 become U+FFFD. Read as
    they come when ``stream`` has a binary buffer (a pipe or a file)."""
    if hasattr(stream, "buffer"):
        text = io.TextIOWrapper(stream.buffer, encoding="utf-8", errors="replace", newline=None)
        for line in text:
            yield line.removesuffix("\n")
        text.detach()
        return
    lines = _LINE_END.split(stream.read())
    if lines and lines[-1] == "":
        lines.pop()  # the line end of the last line
    yield from lines


def _windows(lines, size: int):
    window = []
    for line in lines:
        window.append(line)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def _cmd_translate(args: argparse.Namespace) -> int:
    model, src_vocab, tgt_vocab, _ = _load(args.checkpoint, args.device)
    if hasattr(sys.stdout, "reconfigure"):  # UTF-8 whatever the locale (e.g. on Windows)
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    # Each window of lines is translated, written and flushed before the next
    # is read: an interrupted or failing run keeps every finished line, and
    # an interactive user gets each answer at once.
    size = 1 if sys.stdin.isatty() else args.batch_size
    done = 0
    for window in _windows(_input_lines(sys.stdin), size):
        try:
            hyps = _translate(model, window, src_vocab, tgt_vocab, args)
        except (MemoryError, RuntimeError) as err:
            if not _out_of_memory(err):
                raise
            raise CLIError(f"out of memory after {done} lines; try a smaller --batch-size "
                           f"or --beam") from None
        for hyp in hyps:
            sys.stdout.write(hyp + "\n")
        sys.stdout.flush()
        done += len(window)
    return 0


def _out_of_memory(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, MemoryError) or "out of memory" in text or "can't allocate" in text


def _reserve_output(path: Path, checkpoint: Path) -> Path:
    """Check ``--output`` before any decoding: not a folder, not the checkpoint
    being read, and writable (a temporary file is created beside it, and
    returned; the translations go there and are renamed over ``path`` at the
    end, so a failed run leaves an existing file as it was)."""
    if path.is_dir():
        raise CLIError(f"--output {path} is a folder")
    if path.exists() and path.resolve() == checkpoint.resolve():
        raise CLIError(f"--output {path} is the checkpoint being evaluated")
    if not path.parent.is_dir():
        raise CLIError(f"--output {path}: {path.parent} is not an existing folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise CLIError(f"--output {path} cannot be written (permission denied)")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise CLIError(f"--output {path} cannot be written ({err.strerror})") from None
    os.close(fd)
    return Path(tmp)


def _cmd_evaluate(args: argparse.Namespace) -> int:

    model, src_vocab, tgt_vocab, info = _load(args.checkpoint, args.device)
    reserved = None
    if args.output is not None:
        reserved = _reserve_output(args.output, checkpoint_file(args.checkpoint))
    try:
        return _evaluate(args, model, src_vocab, tgt_vocab, info, reserved)
    finally:
        if reserved is not None:
            reserved.unlink(missing_ok=True)


def _print_scores(hyps: list[str], refs: list[str]) -> None:
    """sacreBLEU's cased BLEU (the headline), lower-cased BLEU and chrF, each
    followed by its signature."""
    scores = corpus_scores(hyps, refs)
    for score in (scores.bleu, scores.bleu_lc, scores.chrf):
        print(score.detail)
        print(f"signature: {score.signature}")


def _evaluate(args, model, src_vocab, tgt_vocab, info, reserved: Path | None) -> int:
    src_lang, tgt_lang = info.get("src_lang", "de"), info.get("tgt_lang", "en")
    pairs = _load_pairs(args.split, src_lang, tgt_lang, args.data_root, not args.no_download)
    if args.limit is not None:
        pairs = pairs[: args.limit]
    t0 = time.perf_counter()
    hyps = _translate(model, [s for s, _ in pairs], src_vocab, tgt_vocab, args)
    seconds = time.perf_counter() - t0
    if reserved is not None:
        try:
            reserved.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
            os.replace(reserved, args.output)
        except OSError as err:
            raise CLIError(f"cannot write --output {args.output}: {err.strerror}") from None
    search = "greedy" if args.beam == 1 else f"beam {args.beam}"
    print(f"{args.split} {src_lang}→{tgt_lang}, {len(pairs)} sentences, {search}, "
          f"decoded in {seconds:.1f} s")
    _print_scores(hyps, [t for _, t in pairs])
    return 0


COMMANDS = {"train": _cmd_train, "translate": _cmd_translate, "evaluate": _cmd_evaluate}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 error, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, message already printed)
        return int(exc.code or 0)
    try:
        return COMMANDS[args.command](args)
    except CLIError as err:
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # fit's says where the steps taken were saved
        detail = str(exc).removeprefix("fit: interrupted")
        print(f"{PROG} {args.command}: interrupted{detail}", file=sys.stderr)
        return 130
