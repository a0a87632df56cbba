"""The language-model commands: ``lm train`` and ``lm sample``.

    python -m minitransformer lm train --out runs/gpt-en --minutes 10
    python -m minitransformer lm train --out runs/bert-en --objective masked
    python -m minitransformer lm sample --run runs/gpt-en --prompt "A dog" --top-p 0.9

``lm train`` trains a :class:`~minitransformer.lm.LanguageModel` (GPT-style,
next token; ``--objective causal``, the default) or a
:class:`~minitransformer.lm.MaskedLanguageModel` (BERT-style, 80/10/10
masking; ``--objective masked``) on one side of Multi30k (``--lang``, the
English captions by default). Its model flags are the fields of
:class:`~minitransformer.lm.LanguageModelConfig` and its training flags those
of :class:`~minitransformer.training.TrainConfig`, derived as ``train``'s are
(:mod:`minitransformer.training.options`), with the defaults of
:data:`~minitransformer.training.presets.CPU_LM` and
:data:`~minitransformer.training.presets.CPU_LM_TRAINING`; ``--preset 2020s``
puts the 2020s parts on the model (:func:`lm_defaults`), which ``run.json``
records and ``--resume`` compares. The tokenizer is
the one ``train`` builds from the German-English training pairs (by default
one shared SentencePiece model of 8,000 pieces); the masked model gets one id
more, the mask token's (``mask_id`` = the tokenizer's size). The run folder,
its lock and the refusal to overwrite a run are ``train``'s
(:mod:`minitransformer.training.runs`); the checkpoints store the tokenizer,
so ``lm sample`` rebuilds everything from the folder. It prints the
validation perplexity, ``exp`` of :func:`~minitransformer.training.evaluate_loss`
(for the masked model, over the masked tokens).

``lm sample`` encodes ``--prompt`` after BOS (no EOS), continues it with
:func:`~minitransformer.lm.generate` (temperature, top-k, top-p, a seeded
generator) and prints each sample, prompt included, one a line. For a
masked-LM run it fills in the blanks instead: each ``[MASK]`` of the prompt
becomes the mask token and is replaced by one token drawn in a single pass
of the model (BERT reads the whole sentence, so it cannot continue one). Errors are
:class:`~minitransformer.training.runs.RunError` (one line; the command line
prints it and exits with status 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    LMBatcher,
    SubwordTokenizer,
    tokenizer_from_dict,
)
from ..data.lines import one_line
from ..training import TrainingDivergedError, fit, options, precision
from ..training.checkpoint import build_model, load_checkpoint
from ..training.options import (
    DEFAULT_PRESET,
    add_config_flags,
    add_preset_flag,
    config_from_args,
    flag,
    number,
)
from ..training.presets import (
    CPU_DATA,
    CPU_LM,
    CPU_LM_TRAINING,
    CPU_TOKENIZERS,
    ERA_PARTS,
    positions_for,
)
from ..training.recipe import device_for, load_pairs, make_tokenizers, out_of_memory
from ..training.runs import (
    RESUME_KEYS,
    RunError,
    check_memory,
    check_run_folder,
    checkpoint_file,
    config_differences,
    lock_run,
    read_run_info,
    write_json,
)
from .models import LanguageModel, MaskedLanguageModel
from .sampling import generate, sample_next

__all__ = ["add_lm_parser", "COMMANDS", "OBJECTIVES", "LANGS", "BLANK", "lm_defaults",
           "lm_config_from_flags", "lm_train_config_from_flags"]

#: ``--objective``: the model class each trains.
OBJECTIVES: dict[str, type] = {"causal": LanguageModel, "masked": MaskedLanguageModel}
#: ``--lang``: a side of the German-English pairs ``train`` builds its tokenizer from.
LANGS = ("de", "en")

_BUDGET = {"epochs", "max_steps", "max_minutes"}
_TRAIN_DEFAULTS = {**CPU_LM_TRAINING, "epochs": None, "max_minutes": 10.0}
_RUN_KIND = "lm"  # run.json's "kind": what makes a folder an lm train run
#: What marks a missing token in ``lm sample --prompt`` for a masked-LM run.
BLANK = "[MASK]"


# --------------------------------------------------------------------------- parser


def add_lm_parser(sub, make: Callable[..., argparse.ArgumentParser],
                  corpus_args: Callable[[argparse.ArgumentParser, str], None],
                  preset: str = DEFAULT_PRESET) -> None:
    """Add ``lm`` (with ``lm train`` and ``lm sample``) to the subparsers
    ``sub``; ``make(sub, name, help, description)`` makes a parser and
    ``corpus_args(parser, help)`` adds ``--data-root`` / ``--no-download``;
    ``lm train``'s model flags default to :func:`lm_defaults` of ``preset``."""
    lm = make(sub, "lm", "train a language model (GPT- or BERT-style) or sample from one",
              "Train a decoder-only (next token) or encoder-only (masked tokens) language "
              "model on one side of Multi30k, or continue a prompt with a trained one.")
    lm_sub = lm.add_subparsers(dest="lm_command", metavar="COMMAND", required=True)
    _train_parser(lm_sub, make, corpus_args, preset)
    _sample_parser(lm_sub, make)


def lm_defaults(preset: str) -> dict[str, Any]:
    """The defaults of ``lm train``'s model flags: the sizes of
    :data:`~minitransformer.training.presets.CPU_LM` with ``preset``'s parts,
    the fields that ``language_model_config(vocab_size, era=preset, **CPU_LM)`` sets."""
    return {**ERA_PARTS[preset], **CPU_LM}


def _train_parser(sub, make, corpus_args, preset: str) -> None:
    tr = make(sub, "train", "train a language model on one side of Multi30k",
              "Train until the budget is spent, then print the validation perplexity; "
              "checkpoints (with the tokenizer), the history and run.json go to --out. "
              "Defaults: the book's CPU sizes.")
    tr.set_defaults(command="lm train")
    tr.add_argument("--out", required=True, type=Path, help="folder for checkpoints and logs")
    tr.add_argument("--objective", choices=tuple(OBJECTIVES), default="causal",
                    help="causal: GPT-style, predict the next token; masked: BERT-style, "
                    "fill in the tokens hidden by the 80/10/10 rule")
    tr.add_argument("--lang", choices=LANGS, default="en", help="the captions' language")
    corpus_args(tr, "folder holding the raw files (else $MINITRANSFORMER_DATA/multi30k, "
                "the user cache, or a download)")
    budget = tr.add_argument_group("budget (training stops at the first one reached)")
    add_config_flags(budget, options.TRAIN_CONFIG, _TRAIN_DEFAULTS, lambda n: n in _BUDGET)
    model = tr.add_argument_group("model")
    add_preset_flag(model, preset)
    add_config_flags(model, options.LM_CONFIG, lm_defaults(preset))
    opt = tr.add_argument_group("data and optimisation")
    k, positive = CPU_TOKENIZERS, number(int, 1)
    opt.add_argument("--tokenizer", choices=("subword", "words"), default=k["kind"],
                     help="built as train builds it from the German-English training pairs: "
                     "one cased SentencePiece model for both languages (subword) or "
                     "lower-cased words of --lang (words)")
    opt.add_argument("--min-freq", type=positive, default=k["min_freq"],
                     help="rarer words become <unk> (--tokenizer words)")
    opt.add_argument("--vocab-size", type=positive, default=k["vocab_size"],
                     help="pieces of the subword model (--tokenizer subword)")
    opt.add_argument("--max-len", type=positive, default=CPU_DATA["max_len"],
                     help="drop training sentences longer than this (tokens)")
    opt.add_argument("--max-tokens", type=positive, default=CPU_DATA["max_tokens"],
                     help="padded tokens per batch")
    opt.add_argument("--mask-prob", type=number(float, 0, 1, open_low=True, closed_high=True),
                     default=0.15, help="share of the tokens chosen for the masked-LM loss "
                     "(--objective masked)")
    add_config_flags(opt, options.TRAIN_CONFIG, _TRAIN_DEFAULTS, lambda n: n not in _BUDGET)
    opt.add_argument("--overwrite", action="store_true",
                     help="replace the run already in OUT (without it, lm train refuses an "
                     "existing run)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")


def _sample_parser(sub, make) -> None:
    sa = make(sub, "sample", "continue a prompt with a trained language model",
              "Encode the prompt after BOS, continue it token by token (with the key/value "
              "cache) and print each sample, prompt included, one a line.")
    sa.set_defaults(command="lm sample")
    sa.add_argument("--run", required=True, type=Path,
                    help="an lm train folder (best.pt, else last.pt) or a checkpoint file")
    sa.add_argument("--prompt", default="", help="the text to continue (empty: BOS alone)")
    sa.add_argument("--max-new-tokens", type=number(int, 1), default=50,
                    help="tokens to add at most (a sample ends earlier at EOS)")
    sa.add_argument("--temperature", type=number(float, 0), default=1.0,
                    help="divides the logits (0 = greedy)")
    sa.add_argument("--top-k", type=number(int, 1), default=None,
                    help="sample among the K most probable tokens only")
    sa.add_argument("--top-p", type=number(float, 0, 1, open_low=True, closed_high=True),
                    default=None, help="sample from the smallest set of most probable "
                    "tokens whose probabilities sum to at least P (the nucleus)")
    sa.add_argument("--num-samples", type=number(int, 1, 1025,
                                                 what="a positive integer, at most 1024"),
                    default=1, help="samples drawn together")
    sa.add_argument("--seed", type=options.RANGES["seed"], default=0,
                    help="seed of the draws (the same seed gives the same samples)")
    sa.add_argument("--device", default="auto", help="'auto' (CUDA, MPS, CPU) or a torch device")


# --------------------------------------------------------------------------- train


def lm_config_from_flags(args: argparse.Namespace, tokenizer_size: int) -> Any:
    """The :class:`~minitransformer.lm.LanguageModelConfig` that ``lm train``'s
    flags ask for: the tokenizer's ids (one more, the mask token's, for the
    masked objective) and positions for ``--max-len`` tokens plus BOS and EOS."""
    extra = 1 if args.objective == "masked" else 0
    return config_from_args(options.LM_CONFIG, args, vocab_size=tokenizer_size + extra,
                            max_len=positions_for(args.max_len))


def lm_train_config_from_flags(args: argparse.Namespace) -> Any:
    """The :class:`~minitransformer.training.TrainConfig` that ``lm train``'s flags ask for."""
    return config_from_args(options.TRAIN_CONFIG, args, checkpoint_dir=str(args.out))


def _run_info(args: argparse.Namespace, **more: Any) -> dict:
    """What ``run.json`` records of an ``lm train`` run (plus ``more``)."""
    data = {"tokenizer": args.tokenizer, "min_freq": args.min_freq,
            "vocab_size": args.vocab_size, "max_len": args.max_len,
            "max_tokens": args.max_tokens, "seed": args.seed}
    if args.objective == "masked":
        data["mask_prob"] = args.mask_prob
    return {"kind": _RUN_KIND, "dataset": "multi30k", "objective": args.objective,
            "lang": args.lang, "preset": args.preset, "data": data, **more}


def _sentences(args: argparse.Namespace) -> tuple[list[list[int]], list[list[int]], Any]:
    """(training ids, validation ids, tokenizer): the ``--lang`` side of the
    German-English pairs, encoded (no BOS/EOS) with the tokenizer ``train``
    builds from the training pairs."""
    pairs = [load_pairs(split, *LANGS, args.data_root, not args.no_download)
             for split in ("train", "val")]
    tokenizer = make_tokenizers(args, pairs[0], target_pieces="all")[LANGS.index(args.lang)]
    side = LANGS.index(args.lang)
    longest = positions_for(args.max_len) - 2  # BOS and EOS around each sentence
    train, valid = ([ids for ids in (tokenizer.encode(p[side]) for p in split) if ids]
                    for split in pairs)
    train = [ids for ids in train if len(ids) <= args.max_len]
    valid = [ids for ids in valid if len(ids) <= longest]
    if not train or not valid:
        raise RunError(f"no usable training or validation sentences in --lang {args.lang}")
    return train, valid, tokenizer


def _batches(args: argparse.Namespace, train: list, valid: list, tokenizer: Any
             ) -> tuple[LMBatcher, list]:
    """Shuffled training batches and the validation batches in order (for the
    masked objective, masked afresh each epoch; the validation masks fixed)."""
    masking = None
    if args.objective == "masked":
        masking = {"mask_id": len(tokenizer), "vocab_size": len(tokenizer), "p": args.mask_prob}
    train_batches = LMBatcher(train, args.max_tokens, shuffle=True, seed=args.seed,
                              masking=masking)
    valid_batches = list(LMBatcher(valid, args.max_tokens, shuffle=False, seed=args.seed,
                                   masking=masking))
    vocabulary = (f"one subword vocabulary of {len(tokenizer):,} pieces"
                  if isinstance(tokenizer, SubwordTokenizer) else
                  f"a vocabulary of {len(tokenizer):,} words")
    mask = ", plus the mask token" if masking else ""
    print(f"multi30k {args.lang}: {len(train):,} training sentences, {len(valid):,} "
          f"validation sentences, {vocabulary}{mask}, {len(train_batches)} batches an epoch",
          flush=True)
    return train_batches, valid_batches


def _check_resume(args: argparse.Namespace, tokenizer: Any, model_config: Any) -> None:
    """Check that ``--out`` holds the ``lm train`` run these flags describe:
    objective, language, preset, data settings, every model field and the tokenizer;
    one line names every difference."""
    file = args.out / "last.pt"
    info = read_run_info(args.out, LANGS)
    if info.get("kind") != _RUN_KIND:
        raise RunError(f"--resume: {args.out} holds no lm train run (its run.json says no "
                       "\"kind\": \"lm\"); train it with lm train, or choose another --out")
    ckpt = load_checkpoint(file)
    for key in RESUME_KEYS:
        if not ckpt.get(key):
            raise RunError(f"cannot resume from {file}: it holds no {key}")
    now = _run_info(args)
    run = {"objective": now["objective"], "lang": now["lang"], "preset": DEFAULT_PRESET,
           **info}  # a run older than a key has the value every run had then
    differ = [f"--{k} {now[k]} (run: {run[k]})" for k in ("objective", "lang", "preset")
              if run[k] != now[k]]
    stored = info.get("data", {})
    differ += [f"--{k.replace('_', '-')} {v} (run: {stored[k]})"
               for k, v in now["data"].items() if stored.get(k, v) != v]
    names = {f.name: flag(f.name) for f, _ in options.config_fields(options.LM_CONFIG)}
    names.update({k: f"{v} gives {k}" for k, v in options.INVERTED.items()})
    # vocab_size follows from the tokenizer (compared below) and the objective
    differ += config_differences(ckpt["model_config"], model_config, names,
                                 ignore=frozenset({"vocab_size"}))
    if differ:
        raise RunError(f"--resume: the run in {args.out} differs: {'; '.join(differ)}; resume "
                       "with the run's options")
    stored_tokenizer = tokenizer_from_dict((ckpt.get("vocabs") or {}).get("text"))
    if stored_tokenizer != tokenizer:
        raise RunError(f"--resume: the training data give another tokenizer than the run in "
                       f"{args.out} (other corpus files?)")


def _build(model_class: type, config: Any, device: torch.device, seed: int) -> torch.nn.Module:
    """``model_class(config)`` initialised from ``seed``, after checking on
    the meta device that its training state fits in ``device``'s memory."""
    with torch.device("meta"):
        check_memory(model_class(config), device)
    torch.manual_seed(seed)
    with out_of_memory("out of memory while building the model; choose smaller sizes"):
        return model_class(config)


def _train(args: argparse.Namespace) -> int:
    config, device = lm_train_config_from_flags(args), device_for(args.device)
    lm_config_from_flags(args, 4)  # the config's own checks (e.g. --heads divides --d-model)
    model_class = OBJECTIVES[args.objective]
    with lock_run(args.out):
        replaced = check_run_folder(args.out, args.resume, args.overwrite)
        train, valid, tokenizer = _sentences(args)
        train_batches, valid_batches = _batches(args, train, valid, tokenizer)
        model_config = lm_config_from_flags(args, len(tokenizer))
        if args.resume:
            _check_resume(args, tokenizer, model_config)
        model = _build(model_class, model_config, device, args.seed)
        print(f"{'resuming from ' + str(args.out / 'last.pt') + '; ' if args.resume else ''}"
              f"{model_class.__name__}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}"
              f" M parameters; training for at most {args.max_minutes:g} minutes on {device} "
              f"in {precision(device, args.amp)[1]}", flush=True)
        for old in replaced:
            old.unlink()
        if isinstance(tokenizer, SubwordTokenizer):  # a plain SentencePiece file, for other tools
            tokenizer.save(args.out / "tokenizer.model")
        write_json(args.out / "run.json", _run_info(
            args, model_config=model_config.to_dict(), train_config=config.to_dict()), indent=2)
        mask_id = len(tokenizer) if args.objective == "masked" else None
        vocabs = {"text": tokenizer, "lm": {"lang": args.lang, "objective": args.objective,
                                            "mask_id": mask_id}}
        try:
            with out_of_memory(f"out of memory while training; the last checkpoint in "
                               f"{args.out} is kept; try a smaller --max-tokens or model"):
                history = fit(model, train_batches, valid_batches, config,
                              progress=not args.quiet, vocabs=vocabs)
        except TrainingDivergedError as err:
            raise RunError(f"{err} (--lr)") from None
        write_json(args.out / "history.json", history.to_dict())
    steps = history.step[-1] if history.step else 0
    what = "masked tokens" if args.objective == "masked" else "next tokens"
    if history.valid_loss:
        loss = history.valid_loss[-1]
        valid = f"{loss:.3f} nats/token, perplexity {math.exp(min(loss, 700)):.1f}"
    else:
        valid = "n/a"
    print(f"stopped ({history.stop_reason}) after {steps} steps; validation cross-entropy "
          f"({what}) {valid}; {history.tokens_per_second:,.0f} tokens/s; checkpoints in "
          f"{args.out}", flush=True)
    return 0


# --------------------------------------------------------------------------- sample


def _load(path: Path, device: torch.device) -> tuple[torch.nn.Module, Any]:
    """(model in eval mode on ``device``, tokenizer) of an ``lm train`` checkpoint."""
    file = checkpoint_file(path)
    try:
        ckpt = load_checkpoint(file, map_location="cpu")
        vocabs = ckpt.get("vocabs") or {}
        if "text" not in vocabs:
            raise RunError(f"{file} is not a language-model checkpoint (it stores no text "
                           "tokenizer; lm train writes one; a translator is used with translate)")
        model = build_model(ckpt, map_location="cpu")
        tokenizer = tokenizer_from_dict(vocabs["text"])
    except FileNotFoundError as err:
        raise RunError(str(err)) from None
    except RunError:
        raise
    except (ValueError, TypeError, KeyError, RuntimeError, AttributeError) as err:
        raise RunError(f"cannot use checkpoint {file}: {err}") from None
    if not isinstance(model, (LanguageModel, MaskedLanguageModel)):
        raise RunError(f"{file} holds a {type(model).__name__}, not a language model")
    extra = 1 if isinstance(model, MaskedLanguageModel) else 0  # the mask token's id
    if model.config.vocab_size != len(tokenizer) + extra:
        raise RunError(f"cannot use checkpoint {file}: its tokenizer has {len(tokenizer)} ids "
                       f"but its model {model.config.vocab_size}")
    return model.to(device), tokenizer


def _sample(args: argparse.Namespace) -> int:
    device = device_for(args.device)
    model, tokenizer = _load(args.run, device)
    if isinstance(model, MaskedLanguageModel):
        return _fill_in(args, model, tokenizer, device)
    prompt = [BOS_ID] + tokenizer.encode(args.prompt)
    positions = model.config.max_len
    if len(prompt) + args.max_new_tokens > positions:
        raise RunError(f"the prompt's {len(prompt)} tokens (BOS included) + --max-new-tokens "
                       f"{args.max_new_tokens} exceed the model's {positions} positions")
    rows = torch.tensor([prompt] * args.num_samples, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    with out_of_memory("out of memory while sampling; try a smaller --num-samples"):
        out = generate(model, rows, args.max_new_tokens, temperature=args.temperature,
                       top_k=args.top_k, top_p=args.top_p, generator=generator, eos_id=EOS_ID)
    for row in out.cpu():
        print(one_line(tokenizer.decode(row)), flush=True)
    return 0


def _around_blanks(tokenizer: Any, parts: list[str], mask_id: int) -> list[int]:
    """The ids of ``parts`` with ``mask_id`` between each two. A subword
    tokenizer puts a space before the text of each call (SentencePiece's
    dummy prefix), which is the space a word after a blank has; the space
    before a blank is left out (the filled-in token brings its own), and
    a part glued to the blank before it (``[MASK].``) loses that prefix when
    it is a piece of its own."""
    ids: list[int] = []
    for i, part in enumerate(parts):
        if i > 0:
            ids.append(mask_id)
        text = part.rstrip() if i + 1 < len(parts) else part
        piece_ids = tokenizer.encode(text.lstrip() if i > 0 else text)
        glued = i > 0 and text[:1] not in ("", " ")
        if glued and piece_ids and getattr(tokenizer, "id_to_piece", str)(piece_ids[0]) == "▁":
            piece_ids = piece_ids[1:]
        ids += piece_ids
    return ids


def _fill_in(args: argparse.Namespace, model: MaskedLanguageModel, tokenizer: Any,
             device: torch.device) -> int:
    """A masked-LM run: each :data:`BLANK` of ``--prompt`` becomes the mask
    token; one pass of the model fills every blank with one token (drawn as
    ``lm sample`` draws: temperature, top-k, top-p, seed); prints each
    sample, one a line."""
    parts = args.prompt.split(BLANK)
    if len(parts) == 1:
        raise RunError(f"{args.run} holds a masked language model (--objective masked), which "
                       f"fills in blanks and does not continue text: mark each missing token "
                       f"with {BLANK} in --prompt, or sample from an --objective causal run")
    mask_id = model.config.vocab_size - 1  # lm train's: the id after the tokenizer's
    ids = [BOS_ID] + _around_blanks(tokenizer, parts, mask_id) + [EOS_ID]
    if len(ids) > model.config.max_len:
        raise RunError(f"the prompt's {len(ids)} tokens (BOS and EOS included) exceed the "
                       f"model's {model.config.max_len} positions")
    rows = torch.tensor([ids] * args.num_samples, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    blanks = (rows[0] == mask_id).nonzero().squeeze(1)  # (K,) positions
    with torch.inference_mode(), out_of_memory("out of memory while filling in; try a "
                                               "smaller --num-samples"):
        logits = model(rows)[:, blanks]  # (N, K, V)
        logits[..., [PAD_ID, BOS_ID, EOS_ID, UNK_ID, mask_id]] = float("-inf")
        flat = logits.reshape(-1, logits.shape[-1])  # (N * K, V)
        chosen = sample_next(flat, temperature=args.temperature, top_k=args.top_k,
                             top_p=args.top_p, generator=generator)
        rows[:, blanks] = chosen.view(args.num_samples, -1)
    for row in rows.cpu():
        print(one_line(tokenizer.decode(row)), flush=True)
    return 0


#: The commands this module adds, by the name ``main`` reports errors under.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "lm train": _train, "lm sample": _sample,
}
