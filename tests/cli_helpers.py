"""What several command-line test files share (imported as
``from cli_helpers import ...``, as ``decoding_helpers`` is)."""

from __future__ import annotations

from minitransformer.cli import main


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
