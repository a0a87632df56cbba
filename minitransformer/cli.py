"""The command line: train, translate and evaluate a Transformer translator.

    python -m minitransformer train --dataset multi30k --minutes 10 --out runs/de-en
    echo "Ein Mann fährt Fahrrad." | python -m minitransformer translate --checkpoint runs/de-en
    python -m minitransformer evaluate --checkpoint runs/de-en --split test_2016_flickr --beam 4

``lm train`` and ``lm sample`` (a GPT- or BERT-style language model) are
:mod:`minitransformer.lm.cli`'s.

``train``'s defaults are the book's CPU configuration, the one chapter 10
trains (:mod:`minitransformer.training.presets`): an encoder-decoder
Transformer (Vaswani et al. 2017), pre-LN, trained with Adam, the warm-up
schedule and label smoothing, with a moving average of the weights as the
result. ``--preset 2020s`` gives it the 2020s parts instead
(:data:`~minitransformer.training.presets.CPU_MODEL_2020S`; ``lm train``
takes the flag too); the model flags then default to that preset's values,
and ``--help`` shows them. Its model and training flags are the config classes' fields
(:mod:`minitransformer.training.options`); the run folder, its lock and
every file written are :mod:`minitransformer.training.runs`'. It trains
until its time budget (``--minutes``) is spent, validates, saves ``last.pt``
/ ``best.pt`` (:mod:`minitransformer.training.checkpoint`), the
vocabularies, the history and ``run.json`` in ``--out``, and prints the
validation BLEU.

``translate`` reads one sentence a line on stdin and writes exactly one
detokenised translation a line on stdout (an empty line gives an empty line),
so outputs stay aligned with references. ``evaluate`` translates a Multi30k
split and prints sacreBLEU's cased corpus BLEU (the figure papers report),
the lower-cased BLEU and chrF, each with its signature
(:func:`minitransformer.metrics.corpus_scores`).

Errors (bad arguments, a missing or corrupt checkpoint, a missing corpus, a
failed write, a closed pipe) print one line on stderr and exit with status
2, without a traceback; what was finished is kept.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .data import (
    MULTI30K_LANGS,
    MULTI30K_SPLITS,
    TARGET_PIECES,
    TOKENIZER_KINDS,
    as_tokenizer,
)
from .data.lines import LongLines, one_line, read_lines, windows
from .decoding import MAX_ROWS, translate
from .lm import cli as lm_cli
from .metrics import corpus_scores
from .training import TrainingDivergedError, fit, options, precision
from .training.options import DEFAULT_PRESET, add_config_flags, add_preset_flag, number, preset_in
from .training.presets import CPU_DATA, CPU_MODELS, CPU_TOKENIZERS, CPU_TRAINING
from .training.recipe import (
    build_translator,
    check_model_flags,
    check_resume_flags,
    device_for,
    load_pairs,
    load_run,
    make_batches,
    make_tokenizers,
    model_config_from_flags,
    out_of_memory,
    start_run,
    train_config_from_flags,
)
from .training.runs import (
    check_run_folder,
    checkpoint_file,
    lock_run,
    output_target,
    write_json,
    write_text,
)

__all__ = ["main", "build_parser", "parse_args", "checkpoint_file"]

PROG = "python -m minitransformer"


class CLIError(Exception):
    """An error to report in one line (exit status 2), not as a traceback."""


# --------------------------------------------------------------------------- parser

#: Flags of train that are not config fields (the defaults of those that are
#: come from the presets; these are the command line's own).
_BUDGET = {"epochs", "max_steps", "max_minutes"}
_TRAIN_DEFAULTS = {**CPU_TRAINING, "epochs": None, "max_minutes": 10.0}


def _model_defaults(preset: str) -> dict:
    """The defaults of ``train``'s model flags: the CPU translator of
    ``preset`` (:data:`~minitransformer.training.presets.CPU_MODELS`)."""
    return {**CPU_MODELS[preset], "share_embeddings": None}  # None: by --tokenizer


def build_parser(preset: str = DEFAULT_PRESET) -> argparse.ArgumentParser:
    """The ``argparse`` parser of the commands, the model flags of ``train``
    and ``lm train`` defaulting to ``preset``'s values (``--preset``'s
    default too; :func:`main` builds it for the ``--preset`` its arguments give)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train, use and evaluate the minitransformer translator (Multi30k).",
        epilog="Run '%(prog)s COMMAND --help' for the options of a command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _train_parser(sub, preset)
    _decoding_parser(sub, "translate", "translate stdin to stdout, one sentence a line",
                     "Read one source sentence a line on stdin; write exactly one detokenised "
                     "translation a line on stdout (an empty line gives an empty line).")
    _evaluate_parser(sub)
    lm_cli.add_lm_parser(sub, _sub, _corpus_args, preset)  # lm train, lm sample
    return parser


def _sub(sub, name: str, help_text: str, description: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=description,
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def _train_parser(sub, preset: str) -> None:
    tr = _sub(sub, "train", "train a Transformer on a translation corpus",
              "Train an encoder-decoder Transformer until the time budget is spent, then "
              "validate and save checkpoints, vocabularies and the history in --out. "
              "Defaults: the book's CPU configuration.")
    tr.add_argument("--dataset", choices=["multi30k"], default="multi30k", help="the corpus")
    tr.add_argument("--out", required=True, type=Path, help="folder for checkpoints and logs")
    _language_args(tr, "de", "en")
    _corpus_args(tr, "folder holding the raw files (else $MINITRANSFORMER_DATA/multi30k, "
                 "the user cache, or a download)")
    budget = tr.add_argument_group("budget (training stops at the first one reached)")
    add_config_flags(budget, options.TRAIN_CONFIG, _TRAIN_DEFAULTS, lambda n: n in _BUDGET)
    model = tr.add_argument_group("model")
    add_preset_flag(model, preset)
    add_config_flags(model, options.MODEL_CONFIG, _model_defaults(preset))
    opt = tr.add_argument_group("data and optimisation")
    k, positive = CPU_TOKENIZERS, number(int, 1)
    opt.add_argument("--tokenizer", choices=TOKENIZER_KINDS, default=k["kind"],
                     help="words: lower-cased words per language, rare ones become <unk>; "
                     "subword: one cased SentencePiece BPE model for both languages, no "
                     "unknown words")
    opt.add_argument("--min-freq", type=positive, default=k["min_freq"],
                     help="rarer words become <unk> (--tokenizer words)")
    opt.add_argument("--vocab-size", type=positive, default=k["vocab_size"],
                     help="pieces of the subword model (--tokenizer subword)")
    opt.add_argument("--target-pieces", choices=TARGET_PIECES, default=k["target_pieces"],
                     help="the target side's pieces (--tokenizer subword): all of the model's, "
                     "or only those the training targets use (seen: a smaller output layer; "
                     "--share-embeddings needs all)")
    opt.add_argument("--max-len", type=positive, default=CPU_DATA["max_len"],
                     help="drop training pairs with a side longer than this (tokens)")
    opt.add_argument("--max-tokens", type=positive, default=CPU_DATA["max_tokens"],
                     help="padded source + target tokens per batch")
    add_config_flags(opt, options.TRAIN_CONFIG, _TRAIN_DEFAULTS, lambda n: n not in _BUDGET)
    opt.add_argument("--overwrite", action="store_true",
                     help="replace the run already in OUT (without it, train refuses an "
                     "existing run)")
    opt.add_argument("--no-bleu", action="store_true",
                     help="skip the validation BLEU printed at the end")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")


def _language_args(p: argparse.ArgumentParser, src: str | None, tgt: str | None) -> None:
    what = "" if src else " (default: the checkpoint's)"
    p.add_argument("--src-lang", choices=MULTI30K_LANGS, default=src, help="source language" + what)
    p.add_argument("--tgt-lang", choices=MULTI30K_LANGS, default=tgt, help="target language" + what)


def _corpus_args(p: argparse.ArgumentParser, root_help: str) -> None:
    p.add_argument("--data-root", type=Path, default=None, help=root_help)
    p.add_argument("--no-download", action="store_true", help="never use the network")


def _decoding_parser(sub, name: str, help_text: str, description: str):
    p = _sub(sub, name, help_text, description)
    p.add_argument("--checkpoint", required=True, type=Path,
                   help="a checkpoint file, or a training folder (best.pt, else last.pt)")
    beam = number(int, 1, MAX_ROWS + 1,
                  what=f"a positive integer, at most {MAX_ROWS} (the rows decoded at once)")
    p.add_argument("--beam", type=beam, default=1, help="beam size (1 = greedy search)")
    p.add_argument("--length-penalty", type=number(float, -10, 10, closed_high=True),
                   default=0.6, help="GNMT length penalty alpha of beam search ((5 + length) "
                   "/ 6 to this power divides a hypothesis's log-probability)")
    p.add_argument("--batch-size", type=number(int, 1), default=128,
                   help="sentences decoded together")
    p.add_argument("--device", default="auto", help="'auto' (CUDA, MPS, CPU) or a torch device")
    p.add_argument("--long-lines", choices=["truncate", "error"], default="truncate",
                   help="a source line longer than the model's positions: translate its "
                   "first pieces (truncate, said once on stderr) or stop there (error)")
    return p


def _evaluate_parser(sub) -> None:
    ev = _decoding_parser(sub, "evaluate", "BLEU of a checkpoint on a Multi30k split",
                          "Translate a Multi30k split and print sacreBLEU's corpus BLEU (cased, "
                          "the figure papers report), lower-cased BLEU and chrF, each with its "
                          "signature.")
    ev.add_argument("--split", choices=MULTI30K_SPLITS, default="test_2016_flickr")
    _language_args(ev, None, None)
    _corpus_args(ev, "folder holding the raw files (default: as for train)")
    ev.add_argument("--limit", type=number(int, 1), default=None,
                    help="evaluate on the first N sentences only")
    ev.add_argument("--output", type=Path, default=None,
                    help="also write the translations to this file, one a line (never a "
                    "file of a training run)")
    ev.add_argument("--overwrite", action="store_true", help="--output may replace a file")


def _translate(model, sentences: list[str], src_vocab, tgt_vocab, args) -> list[str]:
    out = translate(model, sentences, src_vocab, tgt_vocab, beam_size=args.beam,
                    batch_size=args.batch_size, length_penalty=args.length_penalty)
    # One line per input line, whatever the model produced.
    return [one_line(line) for line in out]


def _print_scores(hyps: list[str], refs: list[str]) -> None:
    """sacreBLEU's cased BLEU (the headline), lower-cased BLEU and chrF, each
    followed by its signature."""
    scores = corpus_scores(hyps, refs)
    for score in (scores.bleu, scores.bleu_lc, scores.chrf):
        print(score.detail)
        print(f"signature: {score.signature}")


# --------------------------------------------------------------------------- train


def _fit(args, model, train_batches, valid_batches, config, src_vocab, tgt_vocab):
    languages = {"src": args.src_lang, "tgt": args.tgt_lang}  # read back by load_run
    try:
        with out_of_memory(f"out of memory while training; the last checkpoint in {args.out} "
                           "is kept; try a smaller --max-tokens or model"):
            return fit(model, train_batches, valid_batches, config, progress=not args.quiet,
                       vocabs={"src": src_vocab, "tgt": tgt_vocab, "languages": languages})
    except TrainingDivergedError as err:  # --lr too high: stopped before saving NaN weights
        raise CLIError(f"{err} (--lr)") from None


def _cmd_train(args: argparse.Namespace) -> int:
    # the flags, checked first
    config, device = train_config_from_flags(args), device_for(args.device)
    check_model_flags(args)
    with lock_run(args.out):
        replaced = check_run_folder(args.out, args.resume, args.overwrite)
        pairs = [load_pairs(split, args.src_lang, args.tgt_lang, args.data_root,
                            not args.no_download) for split in ("train", "val")]
        src_vocab, tgt_vocab = make_tokenizers(args, pairs[0])
        train_batches, valid_batches = make_batches(args, *pairs, src_vocab, tgt_vocab)
        model_config = model_config_from_flags(args, len(src_vocab), len(tgt_vocab))
        if args.resume:
            check_resume_flags(args, src_vocab, tgt_vocab, model_config)
        model = build_translator(model_config, device, args.seed)
        print(f"{'resuming from ' + str(args.out / 'last.pt') + '; ' if args.resume else ''}"
              f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters; "
              f"training for at most {args.max_minutes:g} minutes on {device} in "
              f"{precision(device, args.amp)[1]}", flush=True)
        start_run(args, replaced, src_vocab, tgt_vocab, model_config, config)
        history = _fit(args, model, train_batches, valid_batches, config, src_vocab, tgt_vocab)
        write_json(args.out / "history.json", history.to_dict())
    steps = history.step[-1] if history.step else 0
    valid = f"{history.valid_loss[-1]:.3f}" if history.valid_loss else "n/a"
    print(f"stopped ({history.stop_reason}) after {steps} steps; validation cross-entropy "
          f"{valid} nats/token; {history.tokens_per_second:,.0f} tokens/s; checkpoints in "
          f"{args.out}", flush=True)
    if not args.no_bleu:
        model.eval()
        with out_of_memory("out of memory while decoding the validation BLEU; the run is "
                           "saved (--no-bleu skips it)"):
            hyps = _translate(model, [s for s, _ in pairs[1]], src_vocab, tgt_vocab, _GREEDY)
        print("validation, greedy:")
        _print_scores(hyps, [t for _, t in pairs[1]])
    return 0


_GREEDY = argparse.Namespace(beam=1, batch_size=128, length_penalty=0.6)


# --------------------------------------------------------------------------- translate


def _cmd_translate(args: argparse.Namespace) -> int:
    model, src_vocab, tgt_vocab, _ = load_run(args.checkpoint, args.device)
    if hasattr(sys.stdout, "reconfigure"):  # UTF-8 whatever the locale (e.g. on Windows)
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    # Each window of lines is translated, written and flushed before the next
    # is read: an interrupted or failing run keeps every finished line, and
    # an interactive user gets each answer at once.
    size = 1 if sys.stdin.isatty() else args.batch_size
    limit = getattr(model.config, "max_len", None)
    long_lines = LongLines(as_tokenizer(src_vocab, True), limit, args.long_lines == "error")
    done = 0
    try:
        for window in windows(read_lines(sys.stdin), size):
            long_lines.check(window, done)
            with out_of_memory(f"out of memory after {done} lines; try a smaller "
                               "--batch-size or --beam"):
                hyps = _translate(model, window, src_vocab, tgt_vocab, args)
            sys.stdout.write("".join(hyp + "\n" for hyp in hyps))
            sys.stdout.flush()
            done += len(window)
    except BrokenPipeError:
        _quiet_stdout()
        raise CLIError(f"stdout was closed by its reader after {done} lines") from None
    except OSError as err:
        raise CLIError(f"cannot write the translations after {done} lines: "
                       f"{err.strerror or err}") from None
    if long_lines.count:
        print(f"{PROG} translate: {long_lines}", file=sys.stderr)
    return 0


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that Python's flush at exit does
    not report the closed pipe a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


# --------------------------------------------------------------------------- evaluate


def _evaluation_languages(args, recorded: dict, checkpoint: Path) -> tuple[str, str]:
    """``--src-lang`` / ``--tgt-lang``, which must agree with what the
    checkpoint records; de→en (said on stderr) when neither says."""
    given = (args.src_lang, args.tgt_lang)
    if recorded:
        pair = (recorded["src"], recorded["tgt"])
        if any(g is not None and g != r for g, r in zip(given, pair)):
            raise CLIError(f"checkpoint {checkpoint} translates {pair[0]}→{pair[1]}, not "
                           f"{given[0] or pair[0]}→{given[1] or pair[1]}")
        return pair
    return given[0] or "de", given[1] or "en"  # said with the scores


def _cmd_evaluate(args: argparse.Namespace) -> int:
    model, src_vocab, tgt_vocab, recorded = load_run(args.checkpoint, args.device)
    file = checkpoint_file(args.checkpoint)
    src_lang, tgt_lang = _evaluation_languages(args, recorded, file)
    target = None
    if args.output is not None:  # checked before any decoding
        target, note = output_target(args.output, args.overwrite, protected=file)
        if note:
            print(f"{PROG} evaluate: {note}", file=sys.stderr)
    pairs = load_pairs(args.split, src_lang, tgt_lang, args.data_root, not args.no_download)
    pairs = pairs[: args.limit]
    t0 = time.perf_counter()
    with out_of_memory("out of memory while decoding; try a smaller --batch-size or --beam"):
        hyps = _translate(model, [s for s, _ in pairs], src_vocab, tgt_vocab, args)
    seconds = time.perf_counter() - t0
    if target is not None:
        try:
            write_text(target, "".join(h + "\n" for h in hyps))
        except OSError as err:
            raise CLIError(f"cannot write --output {args.output}: {err.strerror or err}") from None
    search = "greedy" if args.beam == 1 else f"beam {args.beam}"
    assumed = "" if recorded or None not in (args.src_lang, args.tgt_lang) else (
        " (assumed: the checkpoint records no languages; see --src-lang, --tgt-lang)")
    print(f"{args.split} {src_lang}→{tgt_lang}{assumed}, {len(pairs)} sentences, {search}, "
          f"decoded in {seconds:.1f} s")
    _print_scores(hyps, [t for _, t in pairs])
    return 0


COMMANDS = {"train": _cmd_train, "translate": _cmd_translate, "evaluate": _cmd_evaluate,
            **lm_cli.COMMANDS}


def _describe(err: BaseException) -> str:
    """One line for an error: an ``OSError``'s reason and file, else its text."""
    if isinstance(err, OSError) and err.strerror:
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror}{where}"
    return one_line(str(err)) or type(err).__name__


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed by the parser built for the ``--preset`` it gives
    (so that the model flags default to that preset's values, and ``--help``
    shows them)."""
    preset = preset_in(argv)
    args = build_parser(preset).parse_args(argv)
    if getattr(args, "preset", preset) != preset:  # read otherwise than preset_in read it
        args = build_parser(args.preset).parse_args(argv)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 error, 130 interrupted)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, message already printed)
        return int(exc.code or 0)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # stdout closed by its reader (e.g. `| head -1`)
        _quiet_stdout()
        print(f"{PROG} {args.command}: error: stdout was closed by its reader",
              file=sys.stderr)
        return 2
    except (CLIError, ValueError, OSError) as err:  # bad input, a failed write: one line
        print(f"{PROG} {args.command}: error: {_describe(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # fit's says where the steps taken were saved
        detail = str(exc).removeprefix("fit: interrupted")
        print(f"{PROG} {args.command}: interrupted{detail}", file=sys.stderr)
        return 130
