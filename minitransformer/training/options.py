"""Command-line flags derived from the config dataclasses' fields.

Every field of :class:`~minitransformer.model.TransformerConfig` and of
:class:`~minitransformer.training.TrainConfig` becomes a ``train`` flag
(and every field of :class:`~minitransformer.lm.LanguageModelConfig` and
:class:`~minitransformer.training.TrainConfig` an ``lm train`` flag)
(``--field-name``), typed from the field's annotation (``int``, ``float``,
``bool``, ``Literal[...]``, ``X | None``, ``tuple[float, float]``), with the
preset's value (:mod:`~minitransformer.training.presets`) or the field's
default as its default. Beside the fields, this module holds only what a
field cannot say about itself: a help text (:data:`HELP`), a stricter range
(:data:`RANGES`), choices for a ``str`` (:data:`CHOICES`), the few flags
whose name differs from the field's (:data:`RENAMED`, :data:`INVERTED`) and
the fields the caller sets (:data:`SET_BY_CALLER`). A field added to a
config therefore reaches ``train`` (and ``--resume``'s comparison, which
compares whole configs) without an edit here or in :mod:`minitransformer.cli`.

``--preset`` (:func:`add_preset_flag`, one of :data:`PRESETS`) chooses the
era whose parts (:data:`~minitransformer.training.presets.ERA_PARTS`) are
the model flags' defaults. It is read before the parser is built
(:func:`preset_in`), so that ``--help`` shows the chosen preset's defaults.

:func:`number` is the one factory of the command line's numeric argument
types.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..lm.models import LanguageModelConfig
from ..model import TransformerConfig
from .config import TrainConfig
from .device import AMP_MODES
from .presets import ERA_PARTS
from .schedule import SCHEDULES

__all__ = ["number", "flag", "field_default", "config_fields", "add_config_flags",
           "config_from_args", "HELP", "RENAMED", "INVERTED", "SET_BY_CALLER",
           "MODEL_CONFIG", "TRAIN_CONFIG", "LM_CONFIG", "PRESETS", "DEFAULT_PRESET",
           "add_preset_flag", "preset_in"]

#: The classes ``train`` builds (module attributes, read at each call, so a
#: test can put a subclass with one more field in their place).
MODEL_CONFIG: type = TransformerConfig
TRAIN_CONFIG: type = TrainConfig
#: The language model's config class, which ``lm train`` builds.
LM_CONFIG: type = LanguageModelConfig


def number(kind: type = int, low: float | None = None, high: float | None = None, *,
           open_low: bool = False, closed_high: bool = False,
           what: str | None = None) -> Callable[[str], Any]:
    """An ``argparse`` type: text → a finite ``kind`` (``int`` or ``float``)
    in ``[low, high)`` (``(low, ...`` with ``open_low``, ``..., high]`` with
    ``closed_high``); a bound of None is no bound. Its error says what was
    expected (``what``, or words made from the bounds) and what was given."""
    noun = "integer" if kind is int else "number"
    if what is None:
        positive = (low == 0 and open_low) or (kind is int and low == 1 and not open_low)
        if positive and high is None:
            what = f"a positive {noun}"
        elif low is not None and high is not None:
            left, right = "([", ")]"
            what = (f"a{'n' if kind is int else ''} {noun} in {left[not open_low]}{low}, "
                    f"{high}{right[closed_high]}")
        elif low == 0:
            what = f"a non-negative {noun}"
        else:
            what = f"a{'n' if kind is int else ''} {noun}" if low is None else f"a {noun} >= {low}"
        if kind is float and low is None and high is None:
            what = "a finite number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        finite = math.isfinite(value) if kind is float else True
        too_low = low is not None and (value <= low if open_low else value < low)
        too_high = high is not None and (value > high if closed_high else value >= high)
        if not finite or too_low or too_high:
            detail = "" if finite else " (not finite)"
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}{detail}")
        return value

    parse.__name__ = what  # argparse names a type by it
    return parse


#: Help text of each field's flag (a field without one gets its name and type).
HELP: dict[str, str] = {
    "d_model": "model width",
    "num_heads": "attention heads",
    "num_encoder_layers": "encoder layers",
    "num_decoder_layers": "decoder layers",
    "num_layers": "layers",
    "d_ff": "feed-forward inner width",
    "dropout": "dropout probability",
    "norm_first": "the norm after each residual add, as in the paper (default: pre-LN)",
    "share_embeddings": "one embedding table for source and target (needs --tokenizer "
                        "subword, whose vocabulary both languages share; default: the "
                        "preset's with subwords, off with words)",
    "tie_output": "the output projection reuses the target embedding matrix",
    "positional": "position information: added to the embeddings (sinusoidal, learned), "
                  "none, or rotary positions turning queries and keys in self-attention (rope)",
    "norm": "normalisation of every sub-layer: LayerNorm, or RMSNorm (no mean, no shift)",
    "feed_forward": "position-wise network: ReLU (the paper), GELU, or SwiGLU (hidden width "
                    "round(2/3 of --d-ff), about the same parameter count)",
    "num_kv_heads": "key/value heads of grouped-query attention, dividing --heads (1: "
                    "multi-query; 0: one per query head)",
    "bias": "biases in the attention and feed-forward linear layers",
    "lr": "peak learning rate",
    "schedule": "after warm-up: decay as 1/sqrt(step) (noam), stay flat (constant) or fall "
                "linearly to 0 at the end of the budget (linear)",
    "warmup_steps": "warm-up steps",
    "betas": "Adam's beta1 beta2",
    "eps": "Adam's epsilon",
    "weight_decay": "Adam's weight decay",
    "label_smoothing": "label smoothing of the loss",
    "ema_decay": "validate, save and evaluate a moving average of the weights with this "
                 "decay (0 = the weights as trained)",
    "clip_norm": "largest global gradient norm (0 = no clipping)",
    "epochs": "passes over the data",
    "max_steps": "optimiser steps",
    "max_minutes": "wall-clock minutes of training",
    "eval_every": "validate every N steps (default: after each epoch)",
    "seed": "seed of the initial weights, dropout and batch order",
    "device": "'auto' (CUDA, MPS, CPU) or a torch device",
    "amp": "bf16 autocast: 'native' where the hardware computes bf16 (CUDA GPUs with bf16, "
           "CPUs with AVX512_BF16 or AMX where a bf16 matrix product measures >= 1.1x "
           "float32), 'auto' on such GPUs only, 'bf16' always, 'off' never",
    "resume": "continue the run in OUT from OUT/last.pt (same languages, data, vocabularies, "
              "model and optimisation options)",
    "log_every": "steps between progress-bar updates and history flushes",
}

#: Flags whose name is not the field's (``--num-heads`` would be ``--heads``).
RENAMED: dict[str, str] = {
    "num_heads": "--heads", "num_encoder_layers": "--encoder-layers",
    "num_decoder_layers": "--decoder-layers", "num_layers": "--layers",
    "warmup_steps": "--warmup",
    "ema_decay": "--ema", "max_minutes": "--minutes",
}

#: Boolean fields set by a flag meaning their opposite: ``--post-ln`` = ``norm_first=False``.
INVERTED: dict[str, str] = {"norm_first": "--post-ln"}

#: Fields the command line sets itself (from the data, ``--out``, the model).
SET_BY_CALLER = frozenset({"src_vocab_size", "tgt_vocab_size", "vocab_size", "max_len",
                           "pad_id", "checkpoint_dir"})

#: Ranges stricter than the type's (default: ints >= 1, floats finite).
RANGES: dict[str, Callable[[str], Any]] = {
    "dropout": number(float, 0, 1), "label_smoothing": number(float, 0, 1),
    "ema_decay": number(float, 0, 1), "warmup_steps": number(int, 0),
    "seed": number(int, 0, 2**64, what="an integer in [0, 2**64)"),
    "lr": number(float, 0, open_low=True), "max_minutes": number(float, 0, open_low=True),
    "eps": number(float, 0, open_low=True), "weight_decay": number(float, 0),
    "clip_norm": number(float, 0), "log_every": number(int, 1),
    "num_kv_heads": number(int, 0),
}

#: Choices of ``str`` fields.
CHOICES: dict[str, tuple[str, ...]] = {"schedule": SCHEDULES, "amp": AMP_MODES}

#: Optional fields whose flag takes 0 for None (``--ema 0``: no average;
#: ``--num-kv-heads 0``: one per query head, which ``--preset 2020s`` needs).
ZERO_IS_NONE = frozenset({"ema_decay", "clip_norm", "num_kv_heads"})


def flag(name: str) -> str:
    """The flag of field ``name``: ``--d-model``, or its entry in
    :data:`RENAMED` / :data:`INVERTED`."""
    return INVERTED.get(name) or RENAMED.get(name) or "--" + name.replace("_", "-")


def field_default(f: dataclasses.Field) -> Any:
    """A dataclass field's default value (its factory called), or None if it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def config_fields(config_class: type) -> list[tuple[dataclasses.Field, Any]]:
    """``(field, resolved type)`` of the fields of ``config_class`` that get a flag."""
    hints = typing.get_type_hints(config_class)
    return [(f, hints[f.name]) for f in dataclasses.fields(config_class)
            if f.name not in SET_BY_CALLER]


def _kwargs(name: str, hint: Any, default: Any) -> dict[str, Any]:
    """``add_argument`` keywords for one field."""
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    help_text = HELP.get(name, f"{name} ({getattr(hint, '__name__', hint)})")
    if "default:" in help_text:  # says its default itself: no "(default: None)" after it
        help_text += "%(default).0s"
    if name in INVERTED:
        return {"action": "store_false", "default": default, "help": help_text}
    if hint is bool:
        return {"action": argparse.BooleanOptionalAction, "default": default, "help": help_text}
    metavar = flag(name).removeprefix("--").upper().replace("-", "_")
    kw: dict[str, Any] = {"default": default, "help": help_text, "metavar": metavar}
    if name in ZERO_IS_NONE and default is None:
        kw["default"] = hint(0)  # 0 or 0.0, as the flag's type gives it
    if typing.get_origin(hint) is typing.Literal or name in CHOICES:
        choices = CHOICES.get(name) or typing.get_args(hint)
        return {**kw, "choices": choices, "metavar": "{" + ",".join(choices) + "}"}
    if typing.get_origin(hint) is tuple:
        items = typing.get_args(hint)
        return {**kw, "nargs": len(items), "type": number(items[0]),
                "metavar": tuple(f"{metavar}{i + 1}" for i in range(len(items)))}
    if hint in (int, float):
        return {**kw, "type": RANGES.get(name, number(hint, 1 if hint is int else None))}
    return {**kw, "type": hint}


def add_config_flags(group: argparse._ActionsContainer, config_class: type,
                     defaults: Mapping[str, Any], only: Callable[[str], bool] = lambda n: True
                     ) -> None:
    """Add a flag for each field of ``config_class`` (those ``only`` accepts)
    to ``group``; ``defaults`` (e.g. a preset) overrides the fields' own."""
    for f, hint in config_fields(config_class):
        if not only(f.name):
            continue
        default = defaults[f.name] if f.name in defaults else field_default(f)
        group.add_argument(flag(f.name), dest=f.name, **_kwargs(f.name, hint, default))


def config_from_args(config_class: type, args: argparse.Namespace, **set_by_caller: Any):
    """``config_class`` from the flags :func:`add_config_flags` added (and
    ``set_by_caller`` for the others); a ``ValueError`` of the config names
    the flag."""
    values = {}
    for f, _ in config_fields(config_class):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            if f.name in ZERO_IS_NONE and value == 0:
                value = None
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return config_class(**{**values, **set_by_caller})


#: ``--preset``: the eras of :data:`~minitransformer.training.presets.ERA_PARTS`.
PRESETS: tuple[str, ...] = tuple(ERA_PARTS)
#: The preset without ``--preset``: the parts every run had before the flag
#: existed (a run whose ``run.json`` records no preset has them).
DEFAULT_PRESET = "2017"


def add_preset_flag(group: argparse._ActionsContainer, preset: str) -> None:
    """Add ``--preset`` (default ``preset``) to ``group``: the parser's model
    flags must have been given that preset's defaults (:func:`preset_in`)."""
    group.add_argument(
        "--preset", choices=PRESETS, default=preset,
        help="the model's parts, the defaults of the model flags (each flag still overrides "
             "its own): 2017, the paper's; 2020s, Llama's (pre-RMSNorm, SwiGLU, rotary "
             "positions, grouped-query attention, no biases). --help shows the defaults of "
             "the preset given with it")


def preset_in(argv: Sequence[str]) -> str:
    """The ``--preset`` that the command line ``argv`` gives, read before the
    parser is built, since it sets the defaults the model flags take and
    ``--help`` shows: :data:`DEFAULT_PRESET` if none is given, or if what is
    given is not a preset (the parser built then rejects it, as it rejects
    any bad value). Abbreviations (``--pre``) are read as the parser reads them."""
    pre = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    pre.add_argument("--preset")
    try:
        given = pre.parse_known_args(list(argv))[0].preset
    except argparse.ArgumentError:  # "--preset" without a value: the parser says so
        return DEFAULT_PRESET
    return given if given in PRESETS else DEFAULT_PRESET
