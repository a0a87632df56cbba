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
from collections.abc import Iterable
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
    :meth:`train`, or from a model's bytes."""

    kind = "sentencepiece"
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, model_proto: bytes):
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

    # ------------------------------------------------------------------ text ↔ ids

    def encode(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no BOS/EOS); never :attr:`unk_id`."""
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
                keep.append(i)
        return self._sp.decode(keep)

    def pieces(self, text: str) -> list[str]:
        """The pieces ``text`` is split into (``▁`` marks a space before a piece)."""
        return [self._sp.id_to_piece(i) for i in self.encode(text)]

    def id_to_piece(self, i: int) -> str:
        """The piece of id ``i``."""
        return self._sp.id_to_piece(int(i))

    def __len__(self) -> int:
        return self._sp.get_piece_size()

    # ------------------------------------------------------------------ storage

    @property
    def model_proto(self) -> bytes:
        """The SentencePiece model, serialised (what a ``.model`` file holds)."""
        return self._proto

    def to_dict(self) -> dict:
        """``{"kind": "sentencepiece", "model": uint8 tensor}`` for checkpoints."""
        model = torch.frombuffer(bytearray(self._proto), dtype=torch.uint8)
        return {"kind": self.kind, "model": model}

    @classmethod
    def from_dict(cls, d: dict) -> SubwordTokenizer:
        """Rebuild from :meth:`to_dict` (the model as a ``uint8`` tensor or bytes)."""
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
        return cls(model)

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as a SentencePiece ``.model`` file (atomically)."""
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
        return {"model_proto": self._proto}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_proto"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubwordTokenizer) and self._proto == other._proto


    def __repr__(self) -> str:
        return f"SubwordTokenizer(size={len(self)})"
