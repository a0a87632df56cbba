"""What the command line writes and refuses (minitransformer.training.runs and
the commands that use it): one place decides whether a path may be written,
one ``train`` at a time in a run folder, and every failure (a full disk, a
closed pipe, a bad ``run.json``, a value decoding refuses) is one line on
stderr with exit status 2, with finished work kept."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from minitransformer import cli
from minitransformer.cli import main
from minitransformer.data import build_vocabs, load_multi30k
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.training import runs
from minitransformer.training.checkpoint import save_checkpoint
from minitransformer.training.runs import RunError, lock_run, output_target, write_text

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"
TINY = ["--data-root", str(FIXTURES), "--no-download", "--d-model", "16", "--heads", "2",
        "--encoder-layers", "1", "--decoder-layers", "1", "--d-ff", "32", "--quiet",
        "--device", "cpu", "--tokenizer", "words", "--min-freq", "1"]


def _cli(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "error: " in err, err


def _checkpoint(folder: Path, max_len: int = 64, languages: dict | None = None) -> Path:
    """An untrained tiny translator with the fixture corpus's vocabularies."""
    folder.mkdir(parents=True, exist_ok=True)
    src, tgt = build_vocabs(load_multi30k("train", root=FIXTURES, download=False))
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(len(src), len(tgt), d_model=16, num_heads=2,
                                          num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
                                          dropout=0.0, max_len=max_len))
    vocabs = {"src": src, "tgt": tgt}
    if languages is not None:
        vocabs["languages"] = languages
    return save_checkpoint(folder / "model.pt", model, vocabs=vocabs)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("ckpt"))


def _evaluate(checkpoint: Path, *more: str) -> list[str]:
    return ["evaluate", "--checkpoint", str(checkpoint), "--data-root", str(FIXTURES),
            "--no-download", "--limit", "3", *more]


def _a_run(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {"run.json": b'{"src_lang": "de"}', "last.pt": b"weights", "history.json": b"{}"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


# --- one place decides whether a path may be written ----------------------------------------


@pytest.mark.parametrize("name", ["last.pt", "run.json", "history.json", ".lock"])
def test_evaluate_never_writes_a_file_of_a_run(checkpoint, tmp_path, capsys, name):
    files = _a_run(tmp_path / "run")
    code, _, err = _cli(capsys, _evaluate(checkpoint, "--output", str(tmp_path / "run" / name),
                                          "--overwrite"))
    _one_line_error(code, err)
    assert "is a file of the training run" in err
    assert {n: (tmp_path / "run" / n).read_bytes() for n in files} == files


def test_an_existing_file_only_with_overwrite_and_its_mode_kept(checkpoint, tmp_path, capsys):
    output = tmp_path / "hyps.txt"
    output.write_text("old\n")
    output.chmod(0o644)
    code, _, err = _cli(capsys, _evaluate(checkpoint, "--output", str(output)))
    _one_line_error(code, err)
    assert "exists; add --overwrite" in err and output.read_text() == "old\n"
    code, _, err = _cli(capsys, _evaluate(checkpoint, "--output", str(output), "--overwrite"))
    assert code == 0, err
    assert output.read_text().count("\n") == 3
    assert stat.S_IMODE(output.stat().st_mode) == 0o644


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "new.txt", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_a_symlink_is_written_through_and_kept(checkpoint, tmp_path, capsys):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    target.chmod(0o664)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    code, _, err = _cli(capsys, _evaluate(checkpoint, "--output", str(link), "--overwrite"))
    assert code == 0, err
    assert "is a symbolic link: writing to" in err and str(target) in err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().count("\n") == 3
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


def test_a_symlink_to_a_run_file_is_refused(tmp_path):
    _a_run(tmp_path / "run")
    link = tmp_path / "innocent.txt"
    link.symlink_to(tmp_path / "run" / "last.pt")
    with pytest.raises(RunError, match="is a file of the training run"):
        output_target(link, overwrite=True)


def test_a_failed_write_keeps_the_old_file_and_is_one_line(checkpoint, tmp_path, capsys,
                                                           monkeypatch):
    """A full disk while writing --output: the old file as it was, no
    temporary file left, one line."""
    output = tmp_path / "hyps.txt"
    output.write_text("old\n")

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real_fdopen = os.fdopen
    monkeypatch.setattr(runs.os, "fdopen", lambda fd, *a, **k: (real_fdopen(fd).close(), Full())[1])
    code, _, err = _cli(capsys, _evaluate(checkpoint, "--output", str(output), "--overwrite"))
    _one_line_error(code, err)
    assert "No space left on device" in err
    assert output.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["hyps.txt"]


# --- one train at a time in a run folder ----------------------------------------------------


def test_a_second_train_into_a_locked_folder_fails_at_once(tmp_path, capsys):
    """A thread holds the run's lock (as a running train does) until told to
    let go; a train started meanwhile fails at once with one line, and one
    started after the release gets past the lock."""
    out = tmp_path / "run"
    holding, release = threading.Event(), threading.Event()

    def hold():
        with lock_run(out):
            holding.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(timeout=60)
        code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "1", *TINY])
        _one_line_error(code, err)
        assert "is in use by another train (pid" in err
    finally:
        release.set()
        thread.join()
    with lock_run(out):  # free again
        pass


def test_lock_cleans_up_a_folder_it_created_when_the_run_fails(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), lock_run(out):
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "a").exists()


# --- run.json and the languages a checkpoint records ----------------------------------------


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "holds a JSON list, expected an object"),
    ('{"src_lang": "xx", "tgt_lang": "en"}', "src_lang 'xx' is not a known language"),
    ("{not json", "cannot read"),
])
def test_a_bad_run_json_is_one_line(tmp_path, capsys, content, message):
    file = _checkpoint(tmp_path / "run")
    (tmp_path / "run" / "run.json").write_text(content)
    for argv in (["translate", "--checkpoint", str(file)], _evaluate(file)):
        code, _, err = _cli(capsys, argv)
        _one_line_error(code, err)
        assert message in err


def test_evaluate_refuses_other_languages_than_the_checkpoints(tmp_path, capsys):
    file = _checkpoint(tmp_path / "copied", languages={"src": "en", "tgt": "de"})
    code, _, err = _cli(capsys, _evaluate(file, "--src-lang", "de", "--tgt-lang", "en"))
    _one_line_error(code, err)
    assert "translates en→de, not de→en" in err
    # a run.json beside it that says otherwise
    (tmp_path / "copied" / "run.json").write_text('{"src_lang": "de", "tgt_lang": "en"}')
    code, _, err = _cli(capsys, _evaluate(file))
    _one_line_error(code, err)
    assert "translates en→de but" in err


def test_evaluate_uses_the_recorded_languages(tmp_path, capsys, monkeypatch):
    file = _checkpoint(tmp_path / "run", languages={"src": "en", "tgt": "de"})
    seen = []
    monkeypatch.setattr(cli, "load_pairs", lambda split, s, t, *a: seen.append((s, t)) or
                        [("A dog.", "Ein Hund.")])
    code, out, err = _cli(capsys, _evaluate(file))
    assert code == 0, err
    assert seen == [("en", "de")] and "en→de," in out


def test_an_old_checkpoint_without_languages_still_evaluates(checkpoint, capsys):
    code, out, err = _cli(capsys, _evaluate(checkpoint))
    assert code == 0, err
    assert "de→en (assumed: the checkpoint records no languages" in out


def test_train_records_its_languages(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = _cli(capsys, ["train", "--out", str(out), "--max-steps", "1", "--no-bleu",
                                 "--src-lang", "en", "--tgt-lang", "de", *TINY])
    assert code == 0, err
    ckpt = torch.load(out / "last.pt", weights_only=True)
    assert ckpt["vocabs"]["languages"] == {"src": "en", "tgt": "de"}
    assert json.loads((out / "run.json").read_text())["src_lang"] == "en"
    assert not (out / ".lock").read_text().strip() == ""  # the pid that held it


# --- translate: long lines, closed pipes, full disks, refused values -----------------------


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()),
                                                       encoding="utf-8"))


@pytest.fixture(scope="module")
def short(tmp_path_factory) -> Path:
    """A model of 12 positions."""
    return _checkpoint(tmp_path_factory.mktemp("short"), max_len=12)


def test_translate_says_once_how_many_lines_were_cut(short, capsys, monkeypatch):
    long_line = " ".join(["Hund"] * 30)
    _stdin(monkeypatch, f"Ein Hund.\n{long_line}\n\n{long_line}\n")
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(short), "--batch-size", "1"])
    assert code == 0 and out.count("\n") == 4
    assert err.count("\n") == 1 and "2 lines longer than the model's 12 positions" in err


def test_translate_long_lines_error_keeps_finished_lines(short, capsys, monkeypatch):
    _stdin(monkeypatch, "Ein Hund.\n" + " ".join(["Hund"] * 30) + "\nEin Hund.\n")
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(short), "--batch-size", "1",
                                   "--long-lines", "error"])
    _one_line_error(code, err)
    assert "line 2 has 30 pieces, more than the model's 12 positions" in err
    assert out.count("\n") == 1


class _Closing(io.StringIO):
    """A stdout that fails after ``n`` writes with ``error``."""

    def __init__(self, n: int, error: OSError):
        super().__init__()
        self.n, self.error = n, error

    def write(self, text):
        if self.n == 0:
            raise self.error
        self.n -= 1
        return super().write(text)


@pytest.mark.parametrize("error, message", [
    (BrokenPipeError(errno.EPIPE, "Broken pipe"), "stdout was closed by its reader after 1 "),
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (OSError(errno.EFBIG, "File too large"), "File too large"),
])
def test_translate_write_failures_are_one_line(checkpoint, capsys, monkeypatch, error, message):
    _stdin(monkeypatch, "Ein Hund.\nEin Mann.\nEine Frau.\n")
    stdout = _Closing(1, error)
    monkeypatch.setattr(sys, "stdout", stdout)
    code = main(["translate", "--checkpoint", str(checkpoint), "--batch-size", "1"])
    err = capsys.readouterr().err
    _one_line_error(code, err)
    assert message in err and stdout.getvalue().count("\n") == 1  # the first line kept


def test_a_value_decoding_refuses_is_one_line(checkpoint, capsys, monkeypatch):
    def refuses(*args, **kwargs):
        raise ValueError("beam_search: bos_id 99 is outside the vocabulary\n(of 40 ids)")

    monkeypatch.setattr(cli, "translate", refuses)
    _stdin(monkeypatch, "Ein Hund.\n")
    code, _, err = _cli(capsys, ["translate", "--checkpoint", str(checkpoint), "--beam", "2"])
    _one_line_error(code, err)  # its line break too becomes a space
    assert "bos_id 99 is outside the vocabulary (of 40 ids)" in err


@pytest.mark.parametrize("penalty", ["1000", "-1000", "nan"])
def test_extreme_length_penalties_are_refused_in_one_line(checkpoint, capsys, penalty):
    """((5 + length) / 6) ** 1000 overflows a float and ** -1000 is 0: the
    flag takes [-10, 10], which the longest translation stays finite in."""
    code, out, err = _cli(capsys, ["translate", "--checkpoint", str(checkpoint), "--beam", "3",
                                   "--length-penalty", penalty])
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(
        f"--length-penalty: expected a number in [-10, 10], got {float(penalty)}"
        + (" (not finite)" if penalty == "nan" else ""))
    assert ((5 + 10_000) / 6) ** 10 < 1e308 and ((5 + 10_000) / 6) ** -10 > 0


@pytest.mark.slow
def test_translate_into_head_1_is_one_line(checkpoint, tmp_path):
    """``translate | head -1``: the reader goes away; one line on stderr,
    exit status 2, nothing about an exception."""
    lines = gzip.decompress((FIXTURES / "test_2016_flickr.de.gz").read_bytes()).decode()
    (tmp_path / "in.txt").write_text(lines * 50)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    script = (f"{sys.executable} -m minitransformer translate --checkpoint {checkpoint} "
              f"--batch-size 1 < {tmp_path / 'in.txt'} 2> {tmp_path / 'err.txt'} | head -1; "
              "exit ${PIPESTATUS[0]}")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                            timeout=600)
    err = (tmp_path / "err.txt").read_text()
    assert result.returncode == 2, err
    assert result.stdout.count("\n") == 1
    assert err.count("\n") == 1 and "stdout was closed by its reader" in err, err
