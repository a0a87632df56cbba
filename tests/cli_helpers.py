"""What several command-line test files share (imported as
``from cli_helpers import ...``, as ``decoding_helpers`` is)."""

from __future__ import annotations

from minitransformer.cli import main
from minitransformer.training.options import INVERTED, ZERO_IS_NONE, flag


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)``'s exit status and what it printed: ``(code, out, err)``."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> None:
    """Exit status 2 and one error line (argparse puts its usage lines first)."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert "error: " in lines[-1], err
    assert all(line.startswith(("usage: ", " ")) for line in lines[:-1]), err


def help_entries(text: str) -> dict[str, str]:
    """``{option string: its help, on one line}`` of an argparse ``--help``
    text (an entry starts on a line indented by two spaces and a dash)."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("  -"):
            entries.append([line])
        elif line.startswith("   ") and entries:
            entries[-1].append(line)
        else:  # a group title or a blank line ends the entry
            entries.append([])
    found = {}
    for lines in filter(None, entries):
        words = " ".join(lines).split()
        for word in words:
            if not word.startswith("-"):
                break
            found[word.rstrip(",")] = " ".join(words)
    return found


def part_flags(parts: dict) -> list[str]:
    """The flags that ask for the model parts ``parts`` (field → value, as in
    ``ERA_PARTS``) explicitly, whatever the preset."""
    argv: list[str] = []
    for name, value in parts.items():
        if name in INVERTED:  # --post-ln: norm_first=False
            argv += [] if value else [flag(name)]
        elif isinstance(value, bool):
            argv.append(flag(name) if value else "--no-" + flag(name).removeprefix("--"))
        else:
            assert value is not None or name in ZERO_IS_NONE, name
            argv += [flag(name), "0" if value is None else str(value)]
    return argv
