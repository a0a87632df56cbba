"""Subword tokenisation: byte-pair encoding with SentencePiece, cased and lossless.

The Transformer paper (Vaswani et al., 2017) translated with a vocabulary of
about 37,000 byte-pair pieces (Sennrich et al., 2016) shared by source and
target. A subword vocabulary keeps frequent words whole and spells rare
ones from smaller pieces, so no word is ever unknown and the output layer
stays small. :class:`SubwordTokenizer` wraps a SentencePiece model (Kudo &
Richardson, 2018) trained here with:

- ``model_type="bpe"``: byte-pair merges (the algorithm of
  :mod:`minitransformer.data.bpe`, written out for reading);
- ``byte_fallback=True``: a character without a piece of its own is spelled
  as its UTF-8 bytes (256 reserved pieces ``<0x00>`` … ``<0xFF>``), so
  ``encode`` never returns the unknown id, whatever the text (emoji, CJK,
  control characters never seen in training);
- ``normalization_rule_name="identity"`` and ``remove_extra_whitespaces=False``:
  no Unicode normalisation, case kept, spaces kept, so
  ``decode(encode(text)) == text`` for every string (SentencePiece writes a
  space as ``▁``, U+2581; a literal ``▁`` in the text is spelled as bytes so
  it too comes back as itself);
- ``character_coverage=1.0``: every character of the training text gets a
  piece;
- one thread, so the same sentences always give the same model, byte for
  byte (training 58,000 Multi30k sentences takes about a second).

A tokenizer may use only some of its model's pieces (:meth:`SubwordTokenizer.restricted_to`,
``pieces=``): a translator's target side needs an output score only for
the pieces its target sentences are made of, about 4,140 of a joint
8,000-piece model's on Multi30k's English side. Its ids are then its own
(``0 .. len − 1``: the kept pieces in the model's order), and a piece it
does not keep encodes as ``<unk>``.

The special ids are the package's: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2,
``<unk>`` 3. The model is a few hundred kilobytes of bytes
(:attr:`SubwordTokenizer.model_proto`); :meth:`~SubwordTokenizer.to_dict`
stores them as a ``uint8`` tensor, so a checkpoint holding the tokenizer
still loads with ``torch.load(weights_only=True)`` on every supported
PyTorch version.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from .vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID

__all__ = ["SubwordTokenizer", "SPACE_MARK"]

#: SentencePiece's stand-in for a space (U+2581, "lower one eighth block").
SPACE_MARK = "\u2581"

# A private-use character stands in for a literal SPACE_MARK while encoding.
_PRIVATE_USE = range(0xE000, 0xF900)


def _processor(model_proto: bytes):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model_proto)


class SubwordTokenizer:
    """A SentencePiece model behind the package's tokenizer interface
    (:class:`~minitransformer.data.tokenizers.Tokenizer`). Build one with
    :meth:`train`, or from a model's bytes.

    ``pieces``: the model ids this tokenizer uses, increasing, the four
    specials first (None: all of them, numbered as the model numbers them).
    Id ``i`` of the tokenizer is then the model's piece ``pieces[i]``; text
    made of other pieces encodes them as ``<unk>``. :meth:`restricted_to`
    builds one from the texts whose pieces it should keep."""

    kind = "sentencepiece"
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, model_proto: bytes, pieces: Sequence[int] | torch.Tensor | None = None):
        if not isinstance(model_proto, (bytes, bytearray)):
            raise TypeError(
                f"SubwordTokenizer: expected the model's bytes, got {type(model_proto).__name__}"
            )
        self._proto = bytes(model_proto)
        if not self._proto:
            raise ValueError("SubwordTokenizer: the model is 0 bytes; expected a serialised "
                             "SentencePiece model (a .model file)")
        try:
            self._sp = _processor(self._proto)
        except RuntimeError as err:
            reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else "?"
            raise ValueError(f"SubwordTokenizer: not a SentencePiece model ({reason})") from None
        if self._sp.get_piece_size() < len(SPECIALS):
            raise ValueError(f"SubwordTokenizer: the model has {self._sp.get_piece_size()} "
                             f"pieces; expected at least the {len(SPECIALS)} special ones")
        for i in range(self._sp.get_piece_size()):
            try:
                self._sp.id_to_piece(i)
            except UnicodeDecodeError as err:
                raise ValueError(f"SubwordTokenizer: piece {i} is not valid UTF-8 ({err.reason} "
                                 f"at byte {err.start}); the model is damaged") from None
        specials = [self._sp.id_to_piece(i) for i in range(len(SPECIALS))]
        if specials != SPECIALS:
            raise ValueError(
                f"SubwordTokenizer: the first pieces must be {SPECIALS} (the package's "
                f"special ids), got {specials}; train the model with SubwordTokenizer.train"
            )
        self._byte_id = [self._sp.piece_to_id(f"<0x{b:02X}>") for b in range(256)]
        if UNK_ID in self._byte_id:
            raise ValueError(
                "SubwordTokenizer: the model has no byte fallback, so unknown characters "
                "would become <unk>; train it with byte_fallback=True (SubwordTokenizer.train)"
            )
        #: Own id → model id, and back (None: the model's own ids).
        self._model_id: list[int] | None = None
        self._own_id: dict[int, int] | None = None
        if pieces is not None:
            self._keep(pieces)

    def _keep(self, pieces: Sequence[int] | torch.Tensor) -> None:
        where = "SubwordTokenizer"
        if isinstance(pieces, torch.Tensor):
            if pieces.dim() != 1 or pieces.is_floating_point() or pieces.is_complex():
                raise ValueError(f"{where}: pieces must be a 1-D integer tensor, got "
                                 f"{pieces.dtype} of shape {tuple(pieces.shape)}")
            pieces = pieces.tolist()
        if isinstance(pieces, (str, bytes)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in pieces
        ):
            raise TypeError(f"{where}: pieces must be model ids (ints), got {pieces!r:.80}")
        ids, size = list(pieces), self._sp.get_piece_size()
        if ids[: len(SPECIALS)] != list(range(len(SPECIALS))):
            raise ValueError(f"{where}: pieces must start with the {len(SPECIALS)} special ids "
                             f"{list(range(len(SPECIALS)))}, got {ids[: len(SPECIALS)]}")
        bad = next((i for i in ids if not 0 <= i < size), None)
        if bad is not None:
            raise ValueError(f"{where}: piece id {bad} is outside the model (size {size})")
        if any(a >= b for a, b in zip(ids, ids[1:])):
            raise ValueError(f"{where}: pieces must be increasing model ids, each once")
        self._model_id = ids
        self._own_id = {m: own for own, m in enumerate(ids)}

    # ------------------------------------------------------------------ training

    @classmethod
    def train(
        cls, sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "bpe"
    ) -> SubwordTokenizer:
        """Learn a SentencePiece model of ``vocab_size`` pieces from ``sentences``.

        Args:
            sentences: training text, one sentence per item (empty ones are
                skipped). For a joint model, both languages' sentences.
            vocab_size: pieces in all, the 4 specials and the 256 bytes included.
            model_type: ``"bpe"`` (byte-pair merges) or ``"unigram"``.

        The same sentences in the same order always give the same model.
        """
        import sentencepiece as spm

        if isinstance(sentences, str):
            raise TypeError("SubwordTokenizer.train: expected sentences, got a single string")
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(
                f"SubwordTokenizer.train: vocab_size must be a positive int, got {vocab_size!r}"
            )
        if model_type not in ("bpe", "unigram"):
            raise ValueError(
                f"SubwordTokenizer.train: model_type must be 'bpe' or 'unigram', "
                f"got {model_type!r}"
            )
        text = [s for s in sentences if s]
        if not text:
            raise ValueError("SubwordTokenizer.train: no (non-empty) sentences to learn from")
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(text), model_writer=model, model_type=model_type,
                vocab_size=vocab_size, character_coverage=1.0, byte_fallback=True,
                normalization_rule_name="identity", remove_extra_whitespaces=False,
                pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, unk_id=UNK_ID,
                pad_piece=SPECIALS[PAD_ID], bos_piece=SPECIALS[BOS_ID],
                eos_piece=SPECIALS[EOS_ID], unk_piece=SPECIALS[UNK_ID],
                num_threads=1, minloglevel=2,
            )
        except RuntimeError as err:  # e.g. a vocabulary larger than the text allows
            raise ValueError(f"SubwordTokenizer.train: {err}") from None
        return cls(model.getvalue())

    def restricted_to(self, texts: Iterable[str]) -> SubwordTokenizer:
        """The same model using only the pieces that ``texts`` are split into,
        and the four specials: ids ``0 .. n − 1`` in the model's order.

        For a translator's target side, ``texts`` are the training targets:
        the output layer then scores only pieces the model is ever trained to
        produce (a piece never seen as a target only ever has its score
        pushed down). Other text still encodes, the missing pieces as ``<unk>``.
        """
        if isinstance(texts, str):
            raise TypeError("SubwordTokenizer.restricted_to: expected texts, got a single string")
        seen = set(range(len(SPECIALS)))
        for text in texts:
            seen.update(self._model_ids(text))
        if self._model_id is not None:  # a restriction of a restriction keeps to both
            seen &= set(self._model_id)
        return SubwordTokenizer(self._proto, sorted(seen))

    # ------------------------------------------------------------------ text ↔ ids

    def encode(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no BOS/EOS); never :attr:`unk_id`, except for
        a piece that a restricted tokenizer does not keep."""
        ids = self._model_ids(text)
        if self._own_id is None:
            return ids
        return [self._own_id.get(i, UNK_ID) for i in ids]

    def _model_ids(self, text: str) -> list[int]:
        """The model's piece ids of ``text`` (no BOS/EOS, never ``<unk>``)."""
        if not isinstance(text, str):
            raise TypeError(f"SubwordTokenizer.encode: expected a str, got {type(text).__name__}")
        if SPACE_MARK not in text:
            return self._encode(text)
        # decode would turn a literal SPACE_MARK into a space: encode a private-use
        # character the text lacks (spelled in bytes) in its place, then swap bytes.
        stand_in = next(
            c for c in map(chr, _PRIVATE_USE)
            if c not in text and self._sp.piece_to_id(c) == UNK_ID
        )
        ids = self._encode(text.replace(SPACE_MARK, stand_in))
        old, new = self._bytes_of(stand_in), self._bytes_of(SPACE_MARK)
        out, i = [], 0
        while i < len(ids):
            if ids[i : i + len(old)] == old:
                out += new
                i += len(old)
            else:
                out.append(ids[i])
                i += 1
        return out

    def _encode(self, text: str) -> list[int]:
        try:
            return self._sp.encode(text)
        except (UnicodeError, RuntimeError) as err:  # e.g. a lone surrogate
            raise ValueError(
                f"SubwordTokenizer.encode: text is not valid Unicode ({err})"
            ) from None

    def _bytes_of(self, char: str) -> list[int]:
        return [self._byte_id[b] for b in char.encode("utf-8")]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (a list or a 1-D tensor): padding, BOS and
        ``<unk>`` dropped, cut at the first EOS. Byte pieces that do not form
        valid UTF-8 (a model can emit any sequence) become U+FFFD."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        n, keep = len(self), []
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"SubwordTokenizer.decode: id {i} is outside the vocabulary "
                                 f"(size {n})")
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID, UNK_ID):
                keep.append(i if self._model_id is None else self._model_id[i])
        return self._sp.decode(keep)

    def pieces(self, text: str) -> list[str]:
        """The pieces ``text`` is split into (``▁`` marks a space before a piece;
        ``<unk>`` for a piece a restricted tokenizer does not keep)."""
        return [self.id_to_piece(i) for i in self.encode(text)]

    def id_to_piece(self, i: int) -> str:
        """The piece of id ``i``."""
        i = int(i)
        return self._sp.id_to_piece(i if self._model_id is None else self._model_id[i])

    @property
    def model_ids(self) -> list[int] | None:
        """The model id of each of this tokenizer's ids (None: not restricted,
        the ids are the model's)."""
        return None if self._model_id is None else list(self._model_id)

    def __len__(self) -> int:
        return self._sp.get_piece_size() if self._model_id is None else len(self._model_id)

    # ------------------------------------------------------------------ storage

    @property
    def model_proto(self) -> bytes:
        """The SentencePiece model, serialised (what a ``.model`` file holds)."""
        return self._proto

    def to_dict(self) -> dict:
        """``{"kind": "sentencepiece", "model": uint8 tensor}`` for checkpoints,
        and ``"pieces"`` (an int64 tensor of model ids) when restricted."""
        model = torch.frombuffer(bytearray(self._proto), dtype=torch.uint8)
        if self._model_id is None:
            return {"kind": self.kind, "model": model}
        return {"kind": self.kind, "model": model, "pieces": torch.tensor(self._model_id)}

    @classmethod
    def from_dict(cls, d: dict) -> SubwordTokenizer:
        """Rebuild from :meth:`to_dict` (the model as a ``uint8`` tensor or bytes;
        ``"pieces"``, if there, as a tensor or a list)."""
        if not isinstance(d, dict) or d.get("kind") != cls.kind or "model" not in d:
            raise ValueError(
                "SubwordTokenizer.from_dict: expected {'kind': 'sentencepiece', 'model': ...}"
            )
        model = d["model"]
        if isinstance(model, torch.Tensor):
            if model.dtype != torch.uint8 or model.dim() != 1:
                raise ValueError(
                    f"SubwordTokenizer.from_dict: the model must be a 1-D uint8 tensor, got "
                    f"{model.dtype} of shape {tuple(model.shape)}"
                )
            model = model.cpu().numpy().tobytes()
        return cls(model, d.get("pieces"))

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as a SentencePiece ``.model`` file (atomically): the
        whole model, whose ids are a restricted tokenizer's :attr:`model_ids`
        (the restriction travels in :meth:`to_dict`)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(self._proto)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> SubwordTokenizer:
        """Read a model written by :meth:`save` (or by SentencePiece's trainer)."""
        try:
            return cls(Path(path).read_bytes())
        except ValueError as err:
            raise ValueError(f"SubwordTokenizer.load: {path}: {err}") from None

    def __getstate__(self) -> dict:  # pickling (copy.deepcopy, DataLoader workers)
        return {"model_proto": self._proto, "pieces": self._model_id}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_proto"], state.get("pieces"))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SubwordTokenizer) and self._proto == other._proto
                and self._model_id == other._model_id)

    def __repr__(self) -> str:
        if self._model_id is None:
            return f"SubwordTokenizer(size={len(self)})"
        return f"SubwordTokenizer(size={len(self)} of the model's {self._sp.get_piece_size()})"
