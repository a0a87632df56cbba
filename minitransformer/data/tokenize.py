"""A small, rule-based word tokenizer and its inverse.

Multi30k (Elliott et al., 2016) is plain text; the Transformer paper (Vaswani
et al., 2017) used byte-pair encoding, but for a corpus of short image
captions whole words with a minimum frequency make a vocabulary of about
6,000-8,000 words per language, small enough for a CPU.

Rules of :func:`tokenize`:

- lower-case (optional),
- a word is a run of letters/digits, possibly joined by inner hyphens
  (``t-shirt``) or decimal points (``3.5``),
- an English-style clitic starting with an apostrophe is its own token
  (``man's`` → ``man 's``; ``don't`` → ``don 't``),
- every other non-space character (punctuation) is a token of its own.

:func:`detokenize` glues punctuation back so the output reads like normal
text: ``"a man , in a hat ."`` → ``"a man, in a hat."``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["tokenize", "detokenize"]

_TOKEN_RE = re.compile(
    r"\d+(?:[.,]\d+)+"  # numbers with decimal points / thousands separators
    r"|\w+(?:-\w+)*"  # words, inner hyphens kept: t-shirt, 3-year-old
    r"|'\w+"  # clitics: 's 're 't
    r"|[^\w\s]",  # any other single character: punctuation
    re.UNICODE,
)

# No space before these tokens ...
_ATTACH_LEFT = set(",.!?;:%)]}…") | {"...", "n't"}
# ... and none after these.
_ATTACH_RIGHT = set("([{¿¡")


def tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Split ``text`` into word and punctuation tokens.

    Args:
        text: one sentence (any Unicode).
        lowercase: lower-case before splitting (the book's default; BLEU is
            then computed lower-cased too).

    Returns:
        The tokens, e.g. ``tokenize("Two young, White males.")`` →
        ``["two", "young", ",", "white", "males", "."]``.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize: expected a str, got {type(text).__name__}")
    if lowercase:
        text = text.lower()
    return _TOKEN_RE.findall(text)


def detokenize(tokens: Iterable[str]) -> str:
    """Join tokens into readable text (inverse of :func:`tokenize` up to spacing).

    Punctuation such as ``, . ! ? ; : )`` and clitics (``'s``) attach to the
    word before; opening brackets attach to the word after; straight double
    quotes alternate between opening and closing.

    Example: ``detokenize("a man , in a hat .".split())`` → ``"a man, in a hat."``.
    """
    if isinstance(tokens, str):
        raise TypeError("detokenize: expected a list of tokens, got a str (split it first)")
    out: list[str] = []
    glue_next = False  # True after an opening bracket/quote
    quote_open = False
    for tok in tokens:
        if not isinstance(tok, str):
            raise TypeError(f"detokenize: tokens must be str, got {type(tok).__name__}")
        if tok == "":
            continue
        if tok == '"':
            if quote_open:  # closing quote: glue left
                attach_left, opens = True, False
            else:
                attach_left, opens = False, True
            quote_open = not quote_open
        else:
            attach_left = tok in _ATTACH_LEFT or (tok.startswith("'") and len(tok) > 1)
            opens = tok in _ATTACH_RIGHT
        if out and not attach_left and not glue_next:
            out.append(" ")
        out.append(tok)
        glue_next = opens
    return "".join(out)
