"""The sequence-to-sequence interface every model of the package has.

Training (:mod:`minitransformer.training`) and decoding
(:mod:`minitransformer.decoding`) work with *any* model that has the methods
below, not only :class:`~minitransformer.model.Transformer`: the GRU
encoder-decoders of chapter 1 (Bahdanau et al. 2015) have them too.

Two levels:

- :class:`Seq2SeqModel` (required): teacher-forced ``forward``, ``encode``,
  ``decode`` on a whole prefix, ``src_mask`` and ``config.pad_id``. This is
  enough to train and to decode: the decoder then re-runs ``decode`` on the
  whole prefix at every step (simple, but step ``t`` costs ``t`` positions).
- :class:`IncrementalDecoder` (optional, for speed): three hooks that feed
  one token per step and carry a *state* from step to step, so each step
  costs one position. For a Transformer the state is the key/value cache of
  every decoder layer; for a GRU it is the hidden state (and the attention
  memory). :func:`~minitransformer.decoding.greedy_decode` and
  :func:`~minitransformer.decoding.beam_search` use the hooks when a model
  has all three (``isinstance(model, IncrementalDecoder)``).

The state is opaque to the decoding code: it only passes it back to the
model, and asks the model to *reorder* its rows (beam search keeps the best
continuations, and drops sentences that are finished). Row ``i`` of the state
belongs to row ``i`` of the tokens fed with it. :func:`reorder_tensors` does
the reordering for any nest of tensors, so a model whose state is a tensor, a
tuple/list/dict of tensors or a dataclass of them can implement
``reorder_state`` in one line.

Shape letters: ``B`` batch (sentences), ``N`` rows of a decoding state (``B``
in greedy search, up to ``B·K`` in beam search with ``K`` beams), ``S``
source length, ``T`` target length, ``V`` target vocabulary size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from torch import Tensor

__all__ = [
    "Seq2SeqModel",
    "IncrementalDecoder",
    "reorder_tensors",
    "map_tensors",
    "MODELS",
    "qualified_name",
    "register_model",
]


@runtime_checkable
class Seq2SeqModel(Protocol):
    """What training and decoding need from a model.

    ``memory`` is whatever ``encode`` returns and ``decode`` accepts: a tensor
    ``(B, S, D)`` for the Transformer; a tensor or a tuple/list/dict of
    tensors (batch first, dim 0) for other models. The decoding code only
    passes it on, selects its rows (:func:`map_tensors`) and never looks
    inside.
    """

    config: Any  #: has at least ``pad_id`` (the padding id of both vocabularies)

    def __call__(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits: source ids ``(B, S)`` and target input ids
        ``(B, T)`` (BOS + target) → ``(B, T, V)``; position ``t`` predicts
        target token ``t + 1`` from ``tgt_in[:, : t + 1]`` only."""
        ...

    def src_mask(self, src: Tensor) -> Tensor:
        """Source padding mask of source ids ``(B, S)``, passed to ``encode``
        and ``decode`` (the Transformer's is ``(B, 1, 1, S)``, True = real token)."""
        ...

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Any:
        """Source ids ``(B, S)`` → memory (batch first)."""
        ...

    def decode(self, tgt: Tensor, memory: Any, memory_mask: Tensor | None = None) -> Tensor:
        """Target prefix ids ``(B, T)`` starting with BOS, and the memory of the
        same ``B`` sentences → logits ``(B, T, V)`` for the next token at
        every position."""
        ...


@runtime_checkable
class IncrementalDecoder(Protocol):
    """Optional hooks for decoding one token per step.

    The contract, for any prefix ``y_0 = BOS, y_1, ..., y_t``::

        state = model.start_decoding(memory, memory_mask)
        for y in (y_0, ..., y_t):
            logits, state = model.decode_next(y, state)   # y: (N,)
        # logits == model.decode(prefix, memory, memory_mask)[:, -1]  (up to rounding)

    and ``model.reorder_state(state, index)`` gives the state of the rows
    ``index`` (as if those rows had been decoded alone). Tests in
    ``tests/test_decoding.py`` check the Transformer against this contract;
    a model implementing the hooks can reuse
    ``tests/test_decoding.py::assert_incremental_matches_full``.
    """

    def start_decoding(self, memory: Any, memory_mask: Tensor | None = None) -> Any:
        """Prepare decoding of ``N`` sentences whose ``encode`` output is
        ``memory`` (and padding mask ``memory_mask``). Returns the state
        before any target token is fed. Work that depends only on the source
        (the Transformer: the cross-attention keys and values of every layer)
        belongs here, done once per sentence."""
        ...

    def decode_next(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """Feed one token per row and advance.

        Args:
            tokens: ``(N,)`` int64, the latest token of each row (BOS at the
                first call).
            state: from :meth:`start_decoding`, a previous ``decode_next`` or
                :meth:`reorder_state`. It may be updated in place or replaced;
                callers use only the returned one.

        Returns:
            ``(logits, state)``: logits ``(N, V)`` for the token after
            ``tokens``, and the new state.
        """
        ...

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        """Rows ``index`` of the state: ``index`` is ``(N',)`` int64, row ``i``
        of the result is row ``index[i]`` of ``state``. Rows may repeat
        (beam search: several continuations of one hypothesis) and ``N'`` may
        differ from ``N`` (one row per beam at the start; finished sentences
        dropped). Usually ``return reorder_tensors(state, index)``."""
        ...


def map_tensors(fn, obj: Any) -> Any:
    """Apply ``fn`` to every tensor in a nest of tuples, lists, dicts and
    dataclasses; other leaves (ints, None, strings) are kept as they are."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(map_tensors(fn, x) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(fn, x) for x in obj)
    if isinstance(obj, dict):
        return {k: map_tensors(fn, v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: map_tensors(fn, getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj


def reorder_tensors(obj: Any, index: Tensor) -> Any:
    """Select rows ``index`` (``(N',)`` int64) along dim 0 of every tensor in
    a nest (see :func:`map_tensors`): the generic ``reorder_state``."""
    return map_tensors(lambda t: t.index_select(0, index.to(t.device)), obj)


# --------------------------------------------------------------------------- the registry
#
# The package's own model classes, declared where they are defined: a model
# module marks each class that a checkpoint may rebuild with
# ``@register_model(ConfigClass)``, and
# :func:`minitransformer.training.checkpoint.build_model` builds only classes
# found in :data:`MODELS` (no name a file gives is ever imported). The
# package's ``__init__`` imports every model module, so the registry is
# complete once ``minitransformer`` is imported.

ModelClass = TypeVar("ModelClass", bound=type)

#: ``"module:Class"`` of a model → (the model class, its config class).
MODELS: dict[str, tuple[type, type]] = {}


def qualified_name(cls: type) -> str:
    """``"module:Class"``: how a checkpoint names a class."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_model(config_cls: type) -> Callable[[ModelClass], ModelClass]:
    """Class decorator: add the model class, built as ``cls(config_cls(**d))``,
    to :data:`MODELS` (read by checkpoint loading); returns the class unchanged."""

    def register(cls: ModelClass) -> ModelClass:
        MODELS[qualified_name(cls)] = (cls, config_cls)
        return cls

    return register
