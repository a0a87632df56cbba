"""Record the English that ``minitransformer/exercises/locales/zh.py`` translates.

    python tools/record_exercise_messages.py          # after revising zh.py
    python tools/record_exercise_messages.py --check  # exit 1, listing the ids, if out of date

``i18n/zh/exercise_messages.json`` holds, for every message id, the English
text (from ``locales/en.py``) that its Chinese translates. When an English
message changes under the same id, ``tests/test_exercises.py`` fails and
shows the old and new English, until the Chinese is revised and this tool is
run again (the same idea as the hashes in the chapters' translation files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "i18n" / "zh" / "exercise_messages.json"


def english() -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from minitransformer.exercises.locales.en import MESSAGES

    return dict(sorted(MESSAGES.items()))


def recorded() -> dict[str, str]:
    return json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file() else {}


def changed() -> list[str]:
    """Ids whose English is not the English the Chinese was written for (or is new)."""
    now, then = english(), recorded()
    return sorted(k for k in now if then.get(k) != now[k])


def main(argv: list[str]) -> int:
    if "--check" in argv:
        ids = changed()
        print("\n".join(ids) if ids else "zh.py translates the current English")
        return 1 if ids else 0
    RECORD.write_text(json.dumps(english(), ensure_ascii=False, indent=1) + "\n",
                      encoding="utf-8")
    print(f"{RECORD.relative_to(ROOT)}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
