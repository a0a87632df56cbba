"""Reliability of loading and resuming: a crafted or damaged checkpoint is
refused with one line before anything is touched, never crashes the
process; signals and full disks keep the last checkpoint.

Each test builds its corruption from a checkpoint the package itself saved
(``fit`` or ``save_checkpoint``), then changes one entry.
"""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from minitransformer.cli import main
from minitransformer.data import TokenBatcher, build_vocabs, encode_pairs, load_multi30k
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.training import TrainConfig, fit
from minitransformer.training.averaging import ExponentialMovingAverage
from minitransformer.training.checkpoint import (
    CheckpointWriteError,
    build_model,
    load_checkpoint,
    save_checkpoint,
)
from minitransformer.training.loop import make_optimizer
from minitransformer.training.resume_checks import ResumeMismatchError

ROOT = Path(__file__).parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"
TINY = [
    "--data-root", str(FIXTURES), "--no-download",
    "--d-model", "16", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
    "--d-ff", "32", "--min-freq", "1", "--vocab-size", "400", "--max-tokens", "256",
    "--warmup", "5", "--lr", "3e-3", "--quiet", "--device", "cpu", "--no-bleu", "--ema", "0",
]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0], err


def _setup(d_model: int = 16, n: int = 24):
    pairs = load_multi30k("train", root=FIXTURES, download=False)[:n]
    src_vocab, tgt_vocab = build_vocabs(pairs)
    examples = encode_pairs(pairs, src_vocab, tgt_vocab)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=d_model,
                                          num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=32, dropout=0.0,
                                          max_len=32))
    return model, TokenBatcher(examples, 64, shuffle=True, seed=0)


def _quick(**overrides) -> TrainConfig:
    fields = dict(lr=3e-3, warmup_steps=2, epochs=None, seed=0, device="cpu", log_every=1)
    return TrainConfig(**{**fields, **overrides})


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    """A folder whose last.pt ``fit`` wrote after 3 steps (with a weight average)."""
    folder = tmp_path_factory.mktemp("saved")
    model, train = _setup()
    fit(model, train, None, _quick(max_steps=3, ema_decay=0.9, checkpoint_dir=str(folder)),
        progress=False)
    return folder


def _resume_with(tmp_path: Path, saved_run: Path, change) -> None:
    """Resume (``fit``) from a copy of ``saved_run``'s last.pt after ``change(ckpt)``."""
    ckpt = torch.load(saved_run / "last.pt", weights_only=True)
    change(ckpt)
    torch.save(ckpt, tmp_path / "last.pt")
    model, train = _setup()
    fit(model, train, None, _quick(max_steps=5, ema_decay=0.9, checkpoint_dir=str(tmp_path),
                                   resume=True), progress=False)


def _moments(ckpt: dict) -> list[dict]:
    return list(ckpt["optimizer_state"]["state"].values())


def _set_all(key, value):
    def change(ckpt):
        for entry in _moments(ckpt):
            entry[key] = value() if callable(value) else value
    return change


def _first(key, value):
    def change(ckpt):
        _moments(ckpt)[0][key] = value(_moments(ckpt)[0][key])
    return change


def _item(path: tuple, value):
    def change(ckpt):
        target = ckpt
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value
    return change


def _rng_python(ckpt):
    version, internal, gauss = ckpt["rng"]["python"]
    ckpt["rng"]["python"] = (version, tuple(internal[:10]), gauss)


def _rng_numpy_keys(ckpt):
    kind, keys, pos, has_gauss, cached = ckpt["rng"]["numpy"]
    ckpt["rng"]["numpy"] = (kind, keys[:5], pos, has_gauss, cached)


def _group(key, value):
    def change(ckpt):
        ckpt["optimizer_state"]["param_groups"][0][key] = value
    return change


def _drop_param(ckpt):
    ckpt["optimizer_state"]["param_groups"][0]["params"].pop()


CORRUPTIONS = {
    # Adam's moments: each of shape, dtype, device-free value checks
    "1-element moments": (_set_all("exp_avg", lambda: torch.zeros(1)), "exp_avg"),
    "moments of a wider model": (_first("exp_avg_sq", lambda t: torch.zeros(t.shape[0], 32)),
                                 "exp_avg_sq"),
    "moments in float64": (_first("exp_avg", lambda t: t.double()), "float64"),
    "NaN moments": (_first("exp_avg", lambda t: torch.full_like(t, math.nan)), "not finite"),
    "negative second moment": (_first("exp_avg_sq", lambda t: -1 - t), "negative"),
    "moment missing": (lambda c: _moments(c)[0].pop("exp_avg"), "Adam keeps"),
    "a moment that is a list": (_first("exp_avg", lambda t: t.tolist()), "expected a tensor"),
    "step of shape (3,)": (_first("step", lambda t: torch.zeros(3)), "step"),
    "step beyond the run's": (_first("step", lambda t: t + 100), "step"),
    "step not whole": (_first("step", lambda t: t + 0.5), "step"),
    "state of an unknown parameter": (
        lambda c: c["optimizer_state"]["state"].__setitem__(999, _moments(c)[0]), "999"),
    # parameter groups
    "a parameter group too many": (
        _item(("optimizer_state", "param_groups"), lambda g: g + g), "parameter groups"),
    "a parameter dropped": (_drop_param, "parameters"),
    "betas out of range": (_group("betas", (0.9, 2.0)), "betas"),
    "lr that is NaN": (_group("lr", math.nan), "lr"),
    "amsgrad switched on": (_group("amsgrad", True), "amsgrad"),
    "unknown option": (_group("rocket", 1), "keys"),
    # the weights and their average
    "weights of a wider model": (
        _item(("model_state", "src_embed.weight"), lambda t: torch.zeros(t.shape[0], 32)),
        "src_embed.weight"),
    "NaN weights": (
        _item(("model_state", "src_embed.weight"), lambda t: torch.full_like(t, math.nan)),
        "not finite"),
    "a 1-element average": (
        _item(("average", "averaged", "src_embed.weight"), lambda t: torch.zeros(1)),
        "average"),
    "average decay 5": (_item(("average", "decay"), 5.0), "decay"),
    # the counters
    "step negative": (_item(("train_state", "step"), -3), "step"),
    "step a string": (_item(("train_state", "step"), "3"), "step"),
    "epoch a float": (_item(("train_state", "epoch"), 1.5), "epoch"),
    "best_valid NaN": (_item(("train_state", "best_valid"), math.nan), "best_valid"),
    "counter missing": (lambda c: c["train_state"].pop("batch_in_epoch"), "batch_in_epoch"),
    "history not lists": (_item(("train_state", "history", "train_loss"), "x"), "history"),
    "history longer than the run": (
        _item(("train_state", "history"), lambda h: {k: v * 3 if isinstance(v, list) else v
                                                     for k, v in h.items()}), "history"),
    # the random generators
    "torch RNG state truncated": (_item(("rng", "torch"), lambda t: t[:100]), "rng['torch']"),
    "torch RNG state as int64": (_item(("rng", "torch"), lambda t: t.long()), "rng['torch']"),
    "python RNG state short": (_rng_python, "rng['python']"),
    "numpy RNG keys short": (_rng_numpy_keys, "rng['numpy']"),
    "no numpy RNG": (lambda c: c["rng"].pop("numpy"), "numpy"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_resume_refuses_each_kind_of_corruption(name, tmp_path, saved_run):
    change, message = CORRUPTIONS[name]
    with pytest.raises(ResumeMismatchError, match="cannot resume") as info:
        _resume_with(tmp_path, saved_run, change)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_resume_checks_touch_nothing_before_refusing(tmp_path, saved_run):
    """The refusal comes before the model's weights are loaded: the model
    keeps its own initial weights."""
    ckpt = torch.load(saved_run / "last.pt", weights_only=True)
    _moments(ckpt)[-1]["exp_avg"] = torch.zeros(1)
    torch.save(ckpt, tmp_path / "last.pt")
    model, train = _setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ResumeMismatchError):
        fit(model, train, None, _quick(max_steps=5, checkpoint_dir=str(tmp_path), resume=True),
            progress=False)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_an_untouched_checkpoint_still_resumes(tmp_path, saved_run):
    """The checks refuse none of what ``fit`` itself saves."""
    _resume_with(tmp_path, saved_run, lambda ckpt: None)
    assert torch.load(tmp_path / "last.pt", weights_only=True)["train_state"]["step"] == 5


def test_moments_from_a_wider_model_are_refused_not_loaded(tmp_path):
    """A last.pt of a model with d_model 32 resumed into one of d_model 16
    (weights swapped in to fit, the optimizer's moments left as they were)."""
    wide, train = _setup(d_model=32)
    fit(wide, train, None, _quick(max_steps=2, checkpoint_dir=str(tmp_path)), progress=False)
    narrow, _ = _setup(d_model=16)
    ckpt = torch.load(tmp_path / "last.pt", weights_only=True)
    ckpt["model_state"] = narrow.state_dict()
    torch.save(ckpt, tmp_path / "last.pt")
    with pytest.raises(ResumeMismatchError, match="expected shape"):
        fit(narrow, train, None, _quick(max_steps=4, checkpoint_dir=str(tmp_path),
                                        resume=True), progress=False)


@pytest.mark.slow
def test_crafted_moments_exit_2_with_a_message_not_a_segfault(tmp_path):
    """The reproducer of issue 27: Adam's moments replaced by 1-element
    tensors made fused Adam write out of bounds (exit 139). Saved with the
    package's own save_checkpoint from an optimizer whose state was doctored."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "minitransformer", "train", "--out", str(out), *TINY]
    first = subprocess.run([*argv, "--max-steps", "3"], env=ENV, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    ckpt = load_checkpoint(out / "last.pt")
    model = build_model(ckpt)
    optimizer = make_optimizer(model, TrainConfig())
    optimizer.load_state_dict(ckpt["optimizer_state"])  # PyTorch accepts what follows, too
    for state in optimizer.state.values():
        state["exp_avg"], state["exp_avg_sq"] = torch.zeros(1), torch.zeros(1)
    save_checkpoint(out / "last.pt", model, optimizer, train_state=ckpt["train_state"],
                    train_config=ckpt["train_config"], vocabs=ckpt["vocabs"])
    r = subprocess.run([*argv, "--resume", "--max-steps", "6"], env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "error: fit: cannot resume" in last and "exp_avg" in last and "(1,)" in last


# --- loading: compressed entries, non-finite weights, broadcast averages ----------------


def _deflated_copy(path: Path, target: Path) -> Path:
    """``path``'s zip entries rewritten deflated (torch.save stores them)."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    return target


def test_a_checkpoint_with_compressed_entries_is_refused_before_unpacking(tmp_path):
    """A zero tensor of 4 MiB deflates to a few KiB: the compressed entry is
    refused from the zip directory, before torch.load allocates anything."""
    model = Transformer(TransformerConfig(12, 14, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, max_len=32))
    path = save_checkpoint(tmp_path / "plain.pt", model, extra={"pad": torch.zeros(2**20)})
    bomb = _deflated_copy(path, tmp_path / "bomb.pt")
    unpacked = sum(i.file_size for i in zipfile.ZipFile(bomb).infolist())
    assert bomb.stat().st_size * 20 < unpacked  # the crafted file expands
    assert torch.load(bomb, weights_only=True)["extra"]["pad"].numel() == 2**20  # torch would
    with pytest.raises(ValueError, match="compressed entry") as info:
        load_checkpoint(bomb)
    assert "\n" not in str(info.value)


def test_a_zip_directory_declaring_more_than_the_file_holds_is_refused(tmp_path):
    """A stored (uncompressed) entry whose declared size exceeds the file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", b"x" * 100)
    data = bytearray(buffer.getvalue())
    central = data.rfind(b"PK\x01\x02")  # the central directory's entry: sizes at +20, +24
    for offset in (20, 24):
        data[central + offset:central + offset + 4] = (10**9).to_bytes(4, "little")
    path = tmp_path / "crafted.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="declares 1,000,000,000 bytes of entries") as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_a_zip_is_refused_in_one_line(tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save({"model_state": {}}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(path)


def _tiny_translator(tmp_path: Path, **changes) -> Path:
    model = Transformer(TransformerConfig(12, 14, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, max_len=32))
    average = ExponentialMovingAverage(model, 0.9)
    path = save_checkpoint(tmp_path / "t.pt", model, average=average)
    ckpt = torch.load(path, weights_only=True)
    for key, change in changes.items():
        ckpt[key] = change(ckpt[key])
    torch.save(ckpt, path)
    return path


def test_all_nan_weights_are_refused(tmp_path):
    path = _tiny_translator(tmp_path, model_state=lambda s: {
        k: torch.full_like(v, math.nan) if v.is_floating_point() else v for k, v in s.items()})
    with pytest.raises(ValueError, match="not finite"):
        build_model(path, average=False)


def test_cli_translate_with_nan_weights_is_one_line(tmp_path, capsys, monkeypatch):
    """Before, all-NaN weights translated every line to an empty one, exit 0."""
    from minitransformer.data import Vocab

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    model = Transformer(TransformerConfig(12, 14, d_model=8, num_heads=2, num_encoder_layers=1,
                                          num_decoder_layers=1, d_ff=16, max_len=32))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    path = save_checkpoint(tmp_path / "nan.pt", model, vocabs={
        side: Vocab(specials + [f"w{i}" for i in range(n - 4)])
        for side, n in (("src", 12), ("tgt", 14))})
    monkeypatch.setattr("sys.stdin", io.StringIO("w1 w2\n"))
    code = main(["translate", "--checkpoint", str(path), "--device", "cpu"])
    out, err = capsys.readouterr()
    _one_line_error(code, err)
    assert "not finite" in err and out == ""


def test_an_infinite_average_is_refused(tmp_path):
    def infinite(avg):
        avg["averaged"] = {k: torch.full_like(v, math.inf) for k, v in avg["averaged"].items()}
        return avg

    path = _tiny_translator(tmp_path, average=infinite)
    with pytest.raises(ValueError, match="average.*not finite"):
        build_model(path)
    build_model(path, average=False)  # the trained weights themselves are fine


def test_an_average_of_broadcastable_1_element_tensors_is_refused(tmp_path):
    def one_element(avg):
        avg["averaged"] = {k: torch.ones([1] * v.dim()) for k, v in avg["averaged"].items()}
        return avg

    path = _tiny_translator(tmp_path, average=one_element)
    with pytest.raises(ValueError, match="expected a floating-point tensor of shape"):
        build_model(path)


# --- SIGTERM during training ------------------------------------------------------------


_SIGTERM_AT_STEP_3 = """
import os, signal, sys
from minitransformer import cli
real_fit = cli.fit
def fit(*args, **kwargs):
    def on_step(report):
        if report.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # as kill or a job scheduler does
    return real_fit(*args, on_step=on_step, **kwargs)
cli.fit = fit
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_sigterm_saves_last_pt_says_so_and_exits_non_zero(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-c", _SIGTERM_AT_STEP_3, "train", "--out", str(out),
                        "--max-steps", "50", *TINY], env=ENV, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode not in (0, -signal.SIGTERM), r.stderr
    assert "SIGTERM" in r.stderr and "last.pt saved at step 3" in r.stderr
    assert "Traceback" not in r.stderr
    assert torch.load(out / "last.pt", weights_only=True)["train_state"]["step"] == 3


@pytest.mark.slow
def test_sigterm_from_outside_stops_after_the_step(tmp_path):
    """A real ``kill -TERM`` while training runs: the process saves last.pt
    and ends with a message (waits for the first checkpoint, not a time)."""
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "minitransformer", "train", "--out",
                             str(out), *TINY, "--eval-every", "2", "--minutes", "5"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "last.pt").is_file():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint after 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode not in (0, -signal.SIGTERM), err
    assert "interrupted by SIGTERM; last.pt saved at step" in err and "Traceback" not in err
    saved = torch.load(out / "last.pt", weights_only=True)["train_state"]["step"]
    assert f"step {saved}" in err


def test_sigterm_handler_is_put_back_after_fit(tmp_path):
    model, train = _setup()
    before = signal.getsignal(signal.SIGTERM)
    fit(model, train, None, _quick(max_steps=2), progress=False)
    assert signal.getsignal(signal.SIGTERM) is before


# --- a write that fails while saving ------------------------------------------------------


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model, _ = _setup()
    path = save_checkpoint(tmp_path / "last.pt", model)
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.fd = fd

        def writable(self):
            return True

        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            os.close(self.fd)
            super().close()

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Full(fd) if "w" in mode
                        else real_fdopen(fd, mode))
    with pytest.raises(CheckpointWriteError, match="No space left on device.*previous one is kept"):
        save_checkpoint(path, model)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


_FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from minitransformer.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs POSIX file-size limits")
def test_cli_file_size_limit_while_saving_is_one_line_and_keeps_last_pt(tmp_path):
    """Train 3 steps, then resume under a file-size limit below the
    checkpoint's size: exit 2, one line, last.pt as it was."""
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--max-steps", "3", *TINY]) == 0
    before = (out / "last.pt").read_bytes()
    limit = len(before) // 2  # run.json and the vocabularies are far smaller
    r = subprocess.run([sys.executable, "-c", _FILE_SIZE_LIMIT, str(limit), "train", "--out",
                        str(out), "--resume", "--max-steps", "5", *TINY], env=ENV,
                       capture_output=True, text=True, timeout=300)
    _one_line_error(r.returncode, r.stderr)
    assert "cannot write" in r.stderr and "previous one is kept" in r.stderr
    assert (out / "last.pt").read_bytes() == before
    assert not list(out.glob(".*.tmp"))



# --- random generator states from another machine ----------------------------------------


def test_rng_states_mapped_to_another_device_are_accepted():
    """``load_checkpoint(map_location=...)`` moves the generator states with
    everything else; only their type and size matter (meta stands in for CUDA)."""
    from minitransformer.training.checkpoint import get_rng_state
    from minitransformer.training.resume_checks import check_rng_state

    state = get_rng_state()
    state["torch"] = state["torch"].to("meta")
    check_rng_state(state)


def test_cuda_rng_states_of_another_size_are_refused(monkeypatch):
    """Checked against this machine's CUDA generator (faked here: the test
    needs no GPU); a saved state per device, however many there were."""
    from minitransformer.training.checkpoint import get_rng_state
    from minitransformer.training.resume_checks import check_rng_state

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=0: torch.zeros(
        16, dtype=torch.uint8))
    state = {**get_rng_state(), "cuda": [torch.zeros(16, dtype=torch.uint8)] * 3}
    check_rng_state(state)  # saved on three GPUs: fine on one
    state["cuda"] = [torch.zeros(16, dtype=torch.uint8), torch.zeros(3, dtype=torch.uint8)]
    with pytest.raises(ResumeMismatchError, match=r"rng\['cuda'\]\[1\]"):
        check_rng_state(state)
