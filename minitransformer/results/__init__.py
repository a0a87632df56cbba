"""Measured results that chapters show, written by the scripts in ``benchmarks/``.

This folder is their only copy: a benchmark writes its JSON here (package
data, so a chapter finds it on Colab as well as in a clone) and a chapter
reads it with :func:`load_result`.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

__all__ = ["load_result", "RESULTS"]

#: The results a chapter reads, and the script that writes each one.
RESULTS = {
    "rnn_history": "benchmarks/bench_rnn_history.py",
    "rnn_copy": "benchmarks/bench_rnn_copy.py",
    "subword_vocab": "benchmarks/measure_subword_vocab.py",
    "time_to_bleu": "benchmarks/bench_time_to_bleu.py",
    "vocab_choice": "benchmarks/campaign_translator.py (choose, then apply)",
    "recipe_choice": "benchmarks/campaign_translator.py (recipe, recipe-apply, recipe-test)",
    "float32_ten_minutes": "benchmarks/float32_ten_minutes.py (choose, then test)",
    "lm_translation": "benchmarks/bench_lm_translation.py",
    "eras_translation": "benchmarks/bench_lm_translation.py --models encdec encdec-2020s",
    "modern_parts": "benchmarks/bench_modern_parts.py",
}


def load_result(name: str) -> dict[str, Any]:
    """The JSON result ``name`` (a key of :data:`RESULTS`) as a dict.

    Raises ``ValueError`` for an unknown name and ``FileNotFoundError``
    (naming the script to run) if the file is missing.
    """
    if name not in RESULTS:
        raise ValueError(f"load_result: unknown result {name!r}; known: {sorted(RESULTS)}")
    path = files(__name__).joinpath(f"{name}.json")
    if not path.is_file():
        raise FileNotFoundError(
            f"load_result: minitransformer/results/{name}.json is missing; "
            f"run {RESULTS[name]} to write it"
        )
    return json.loads(path.read_text(encoding="utf-8"))
