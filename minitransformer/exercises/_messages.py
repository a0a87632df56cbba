"""Every word a checker prints, looked up by message id in the current language.

The checking logic never holds text: it names a message by its id
(``"sdpa.hint.no_scale"``) with ``str.format`` fields, and :func:`t` turns
that into text in the language in force. A language is one module in
:mod:`minitransformer.exercises.locales` named by its code (``en.py``,
``zh.py``) that defines ``MESSAGES``, a dict from message id to text; an id
that a language lacks falls back to English. See the package docstring for
how to add a language.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import string
from collections.abc import Iterator
from functools import cache

from . import locales

__all__ = ["DEFAULT_LANGUAGE", "available_languages", "catalogue", "format_fields",
           "get_language", "set_language", "t", "using_language"]

#: The language every other one falls back to.
DEFAULT_LANGUAGE = "en"

_current = DEFAULT_LANGUAGE


def available_languages() -> list[str]:
    """Codes of the languages that have a module in ``exercises/locales``."""
    modules = pkgutil.iter_modules(locales.__path__)
    return sorted(m.name for m in modules if not m.name.startswith("_"))


@cache
def catalogue(lang: str) -> dict[str, str]:
    """The messages of ``lang`` (its module's ``MESSAGES``), by id."""
    module = importlib.import_module(f"{locales.__name__}.{lang}")
    return module.MESSAGES


def _resolve(lang: str) -> str:
    """``lang`` as a code of :func:`available_languages`: case and ``-``/``_``
    are ignored, and a regional code falls back to its language (``zh-CN`` →
    ``zh``)."""
    if not isinstance(lang, str):
        raise TypeError(f"language must be a string such as 'en', got {type(lang).__name__}")
    known = available_languages()
    code = lang.strip().lower().replace("-", "_")
    for candidate in (code, code.split("_")[0]):
        if candidate in known:
            return candidate
    raise ValueError(f"no exercise messages in language {lang!r}; available: {', '.join(known)}")


def set_language(lang: str) -> None:
    """Print every later verdict in ``lang`` (e.g. ``"en"``); messages the
    language lacks are printed in English."""
    global _current
    _current = _resolve(lang)


def get_language() -> str:
    """The code of the language verdicts are printed in."""
    return _current


@contextlib.contextmanager
def using_language(lang: str | None) -> Iterator[None]:
    """Within the block, print in ``lang``; None keeps the current language."""
    global _current
    previous = _current
    if lang is not None:
        _current = _resolve(lang)
    try:
        yield
    finally:
        _current = previous


def t(message_id: str, **fields) -> str:
    """The text of ``message_id`` in the current language, with ``fields`` filled in."""
    text = catalogue(_current).get(message_id)
    if text is None:
        text = catalogue(DEFAULT_LANGUAGE)[message_id]  # a missing English id is a bug
    return text.format(**fields) if fields else text.format()


def format_fields(text: str) -> set[str]:
    """Names of the ``str.format`` fields in ``text`` (``{shape}`` → ``shape``)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}
