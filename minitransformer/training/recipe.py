"""What ``python -m minitransformer train`` does between its flags and ``fit``,
and how ``translate`` / ``evaluate`` load a run back.

The command line (:mod:`minitransformer.cli`) reads as the recipe:
pairs → tokenizers → batches → config → model → fit; the steps are here, one
function each: :func:`load_pairs`, :func:`make_tokenizers`,
:func:`make_batches`, :func:`model_config_from_flags`, :func:`build_translator`,
:func:`start_run`. The flags arrive as the ``argparse.Namespace`` that
:func:`minitransformer.cli.build_parser` makes; every error is a
:class:`~minitransformer.training.runs.RunError` (one line).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..data import (
    MULTI30K_LANGS,
    CorpusError,
    DatasetNotFoundError,
    SubwordTokenizer,
    TokenBatcher,
    build_tokenizers,
    encode_pairs,
    load_multi30k,
    tokenizer_from_dict,
)
from ..model import Transformer
from . import options
from .checkpoint import build_model, load_checkpoint
from .device import pick_device
from .options import DEFAULT_PRESET, config_from_args, flag
from .presets import CPU_MODELS, positions_for
from .runs import (
    RunError,
    check_memory,
    check_resume,
    checkpoint_file,
    recorded_languages,
    write_json,
)

__all__ = [
    "device_for",
    "load_run",
    "load_pairs",
    "out_of_memory",
    "model_config_from_flags",
    "shared_embeddings",
    "train_config_from_flags",
    "data_settings",
    "check_resume_flags",
    "run_info",
    "check_model_flags",
    "make_tokenizers",
    "make_batches",
    "build_translator",
    "start_run",
]


def device_for(name: str) -> torch.device:
    """The torch device ``--device NAME`` names (``auto``: CUDA, MPS, else CPU)."""
    try:
        return pick_device(name)
    except RuntimeError as err:
        raise RunError(f"bad --device {name!r}: {err}") from None


def load_run(path: Path, device_name: str) -> tuple[Transformer, Any, Any, dict]:
    """(model in eval mode, src tokenizer, tgt tokenizer, languages) from a
    checkpoint; the languages are ``{"src": .., "tgt": ..}`` as recorded (in
    the checkpoint, else in ``run.json`` beside it; ``{}`` if neither does)."""
    file = checkpoint_file(path)
    device = device_for(device_name)
    try:
        ckpt = load_checkpoint(file, map_location="cpu")
        model = build_model(ckpt, map_location="cpu")
        vocabs = ckpt.get("vocabs") or {}
        src_vocab = tokenizer_from_dict(vocabs["src"])
        tgt_vocab = tokenizer_from_dict(vocabs["tgt"])
    except FileNotFoundError as err:
        raise RunError(str(err)) from None
    except KeyError as err:
        raise RunError(f"{file} is not a translation checkpoint (missing {err})") from None
    except (ValueError, TypeError, RuntimeError, AttributeError) as err:
        raise RunError(f"cannot use checkpoint {file}: {err}") from None
    sizes = (getattr(model.config, "src_vocab_size", None),
             getattr(model.config, "tgt_vocab_size", None))
    if sizes != (len(src_vocab), len(tgt_vocab)):
        raise RunError(
            f"cannot use checkpoint {file}: its vocabularies have {len(src_vocab)} / "
            f"{len(tgt_vocab)} tokens but its model expects {sizes[0]} / {sizes[1]}"
        )
    languages = recorded_languages(file, vocabs.get("languages"), MULTI30K_LANGS)
    return model.to(device), src_vocab, tgt_vocab, languages


def load_pairs(split: str, src: str, tgt: str, root: Path | None,
               download: bool) -> list[tuple[str, str]]:
    """The ``(source, target)`` sentence pairs of a Multi30k split."""
    if src == tgt:
        raise RunError(f"source and target language are both {src!r}")
    try:
        return load_multi30k(split, src, tgt, root=root, download=download)
    except (DatasetNotFoundError, CorpusError) as err:
        raise RunError(str(err)) from None


@contextlib.contextmanager
def out_of_memory(message: str) -> Iterator[None]:
    """Running out of memory in the block becomes ``message`` (one line)."""
    try:
        yield
    except (MemoryError, RuntimeError) as err:
        text = str(err).lower()
        if isinstance(err, MemoryError) or "out of memory" in text or "can't allocate" in text:
            raise RunError(message) from None
        raise


def model_config_from_flags(args: argparse.Namespace, src_size: int, tgt_size: int) -> Any:
    """The model config that ``train``'s flags ask for (``--max-len`` sets its positions)."""
    return config_from_args(options.MODEL_CONFIG, args, src_vocab_size=src_size,
                            tgt_vocab_size=tgt_size, max_len=positions_for(args.max_len),
                            share_embeddings=shared_embeddings(args))


def shared_embeddings(args: argparse.Namespace) -> bool:
    """``--share-embeddings`` as given, else the ``--preset``'s with subwords
    (word vocabularies differ between the languages, so they cannot share)."""
    if args.share_embeddings is not None:
        return args.share_embeddings
    preset = CPU_MODELS[getattr(args, "preset", DEFAULT_PRESET)]
    return (preset["share_embeddings"] and args.tokenizer == "subword"
            and args.target_pieces == "all")


def train_config_from_flags(args: argparse.Namespace) -> Any:
    """The training config that ``train``'s flags ask for."""
    return config_from_args(options.TRAIN_CONFIG, args, checkpoint_dir=str(args.out))


def data_settings(args: argparse.Namespace) -> dict:
    """The data flags a resumed run must repeat (recorded in ``run.json``;
    ``--target-pieces`` only with subwords: word vocabularies are per language)."""
    pieces = {"target_pieces": args.target_pieces} if args.tokenizer == "subword" else {}
    return {"tokenizer": args.tokenizer, "min_freq": args.min_freq,
            "vocab_size": args.vocab_size, **pieces,
            "max_len": args.max_len, "max_tokens": args.max_tokens, "seed": args.seed}


def check_resume_flags(args: argparse.Namespace, src_vocab: Any, tgt_vocab: Any,
                       model_config: Any) -> None:
    """Check that ``args.out`` holds the run these flags describe (see
    :func:`~minitransformer.training.runs.check_resume`) and that the data
    on disk now give its vocabularies."""
    ckpt = load_checkpoint(args.out / "last.pt")
    names = {f.name: flag(f.name) for f, _ in options.config_fields(options.MODEL_CONFIG)}
    names.update({k: f"{v} gives {k}" for k, v in options.INVERTED.items()})
    # The vocabulary sizes follow from the data and the flags: other corpus files
    # are reported below as other vocabularies, not as a size no flag sets.
    sizes = {k: v for k, v in ckpt["model_config"].items()
             if k in ("src_vocab_size", "tgt_vocab_size")}
    check_resume(args.out, ckpt, run_info(args), dataclasses.replace(model_config, **sizes),
                 names, MULTI30K_LANGS)
    stored_vocabs = [tokenizer_from_dict(ckpt["vocabs"].get(side)) for side in ("src", "tgt")]
    if stored_vocabs != [src_vocab, tgt_vocab]:
        raise RunError(f"--resume: the training data give other vocabularies than the run in "
                       f"{args.out} (other corpus files?)")


def run_info(args: argparse.Namespace, **more: Any) -> dict:
    """What ``run.json`` records of the run (plus ``more``)."""
    return {"dataset": args.dataset, "src_lang": args.src_lang, "tgt_lang": args.tgt_lang,
            "preset": args.preset, "data": data_settings(args), **more}


def check_model_flags(args: argparse.Namespace) -> None:
    """Refuse model flags that cannot build a model, before any data is read."""
    if args.share_embeddings and args.tokenizer != "subword":
        raise RunError("--share-embeddings needs --tokenizer subword (the word vocabularies "
                       "of the two languages differ)")
    if args.share_embeddings and args.target_pieces != "all":
        raise RunError("--share-embeddings needs --target-pieces all (one vocabulary for both "
                       f"sides; --target-pieces {args.target_pieces} gives the target side "
                       "fewer pieces)")
    model_config_from_flags(args, 1, 1)  # the config's own checks (e.g. --heads divides --d-model)


def make_tokenizers(args: argparse.Namespace, train_pairs: list[tuple[str, str]],
                    target_pieces: str | None = None) -> tuple:
    """(source, target) tokenizers learnt from the training pairs (``--tokenizer``);
    the target side's pieces from ``target_pieces``, else ``--target-pieces``."""
    return build_tokenizers(train_pairs, args.tokenizer, min_freq=args.min_freq,
                            vocab_size=args.vocab_size,
                            target_pieces=target_pieces or args.target_pieces)


def make_batches(args: argparse.Namespace, train_pairs: list, valid_pairs: list,
                 src_vocab: Any, tgt_vocab: Any) -> tuple[TokenBatcher, list]:
    """Token-budget batches of the encoded pairs: shuffled training batches
    and the validation batches in order; prints what they hold."""
    train_ex = encode_pairs(train_pairs, src_vocab, tgt_vocab, max_len=args.max_len)
    valid_ex = encode_pairs(valid_pairs, src_vocab, tgt_vocab)
    if not train_ex or not valid_ex:
        raise RunError("no usable training or validation pairs")
    train_batches = TokenBatcher(train_ex, args.max_tokens, shuffle=True, seed=args.seed)
    valid_batches = list(TokenBatcher(valid_ex, args.max_tokens, shuffle=False))
    if not isinstance(tgt_vocab, SubwordTokenizer):
        vocabularies = f"vocabularies {len(src_vocab):,} / {len(tgt_vocab):,} words"
    elif len(tgt_vocab) == len(src_vocab):
        vocabularies = f"one subword vocabulary of {len(tgt_vocab):,} pieces"
    else:
        vocabularies = (f"one subword model of {len(src_vocab):,} pieces, {len(tgt_vocab):,} "
                        "of them on the target side")
    print(f"{args.dataset} {args.src_lang}→{args.tgt_lang}: {len(train_ex):,} training pairs, "
          f"{len(valid_ex):,} validation pairs, {vocabularies}, {len(train_batches)} batches "
          "an epoch", flush=True)
    return train_batches, valid_batches


def build_translator(model_config: Any, device: torch.device, seed: int) -> Transformer:
    """The Transformer of ``model_config``, initialised from ``seed``, after
    checking on the meta device that it fits in ``device``'s memory."""
    with torch.device("meta"):  # counted where nothing is allocated
        check_memory(Transformer(model_config), device)
    torch.manual_seed(seed)
    with out_of_memory("out of memory while building the model; choose smaller sizes"):
        return Transformer(model_config)


def start_run(args: argparse.Namespace, replaced: list[Path], src_vocab: Any, tgt_vocab: Any,
              model_config: Any, train_config: Any) -> None:
    """Replace an old run's files (``--overwrite``), save the vocabularies and ``run.json``."""
    subword = isinstance(tgt_vocab, SubwordTokenizer)
    for old in replaced:
        old.unlink()
    if subword:  # also a plain SentencePiece model file, for other tools
        tgt_vocab.save(args.out / "tokenizer.model")
    else:
        src_vocab.vocab.save(args.out / "src_vocab.json")
        tgt_vocab.vocab.save(args.out / "tgt_vocab.json")
    write_json(args.out / "run.json", run_info(
        args, lowercase=not subword, model_config=model_config.to_dict(),
        train_config=train_config.to_dict()), indent=2)
