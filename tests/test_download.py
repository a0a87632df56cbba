"""Tests of Multi30k loading and downloading (minitransformer.data.multi30k).

The download tests serve small fixture files from a local HTTP server on
127.0.0.1 (a thread, ephemeral port): success, checksum mismatch, a transfer
that stops early, a missing file. After a failure no file may be left behind.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import threading
from pathlib import Path

import pytest

from minitransformer.data import (
    MULTI30K_LANGS,
    MULTI30K_SHA256,
    MULTI30K_SPLITS,
    MULTI30K_URL,
    DatasetNotFoundError,
    DownloadError,
    build_vocabs,
    default_cache_dir,
    download_file,
    load_multi30k,
)

FIXTURES = Path(__file__).parent / "fixtures" / "multi30k"


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Server:
    """A tiny HTTP server serving ``files`` (name → bytes) with a switchable fault."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.mode = "ok"  # "ok" | "truncate" | "truncate_no_length"
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                name = self.path.rsplit("/", 1)[-1]
                outer.requests.append(name)
                data = outer.files.get(name)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                if outer.mode != "truncate_no_length":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if outer.mode == "ok":
                    self.wfile.write(data)
                else:  # send half, then close the connection
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True

            def log_message(self, *args):  # keep pytest output quiet
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data/task1/raw/"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def fixture_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(FIXTURES.glob("*.gz"))}


@pytest.fixture
def server(fixture_files):
    with _Server(fixture_files) as s:
        yield s


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No $MINITRANSFORMER_DATA, and a user cache folder inside tmp_path."""
    monkeypatch.delenv("MINITRANSFORMER_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# --- downloading -------------------------------------------------------------


def test_download_success_into_root_then_no_network(server, fixture_files, isolated):
    root = isolated / "root"
    sums = {name: _sha(data) for name, data in fixture_files.items()}
    pairs = load_multi30k("val", root=root, base_url=server.url, checksums=sums, progress=False)
    expected = list(zip(_lines(FIXTURES / "val.de.gz"), _lines(FIXTURES / "val.en.gz"),
                        strict=True))
    assert pairs == expected and len(pairs) == 8
    assert _files(root) == ["val.de.gz", "val.en.gz"]  # no temporary files
    assert (root / "val.de.gz").read_bytes() == fixture_files["val.de.gz"]
    assert server.requests == ["val.de.gz", "val.en.gz"]
    # Second call: found on disk, no request.
    assert load_multi30k("val", root=root, base_url=server.url, checksums=sums) == expected
    assert len(server.requests) == 2


def test_download_goes_to_user_cache_without_root(server, fixture_files, isolated):
    sums = {name: _sha(data) for name, data in fixture_files.items()}
    cache = default_cache_dir()
    assert cache == isolated / "xdg" / "minitransformer" / "multi30k"
    pairs = load_multi30k("test_2016_flickr", base_url=server.url, checksums=sums,
                          progress=False)
    assert len(pairs) == 8
    assert _files(cache) == ["test_2016_flickr.de.gz", "test_2016_flickr.en.gz"]


def test_checksum_mismatch_leaves_nothing(server, fixture_files, isolated):
    root = isolated / "root"
    sums = {name: "0" * 64 for name in fixture_files}
    with pytest.raises(DatasetNotFoundError, match="SHA-256 mismatch") as info:
        load_multi30k("train", root=root, base_url=server.url, checksums=sums, progress=False)
    assert isinstance(info.value.__cause__, DownloadError)
    assert _files(root) == []


@pytest.mark.parametrize("mode", ["truncate", "truncate_no_length"])
def test_interrupted_transfer_leaves_nothing(server, fixture_files, isolated, mode):
    # Big enough to need several reads.
    payload = os.urandom(300_000)
    server.files["big.bin"] = payload
    server.mode = mode
    dest = isolated / "dl" / "big.bin"
    message = "stopped after" if mode == "truncate" else "SHA-256 mismatch"
    with pytest.raises(DownloadError, match=message):
        download_file(server.url + "big.bin", dest, _sha(payload), progress=False)
    assert _files(isolated / "dl") == []
    # The same through load_multi30k.
    sums = {name: _sha(data) for name, data in fixture_files.items()}
    with pytest.raises(DatasetNotFoundError):
        load_multi30k("train", root=isolated / "root", base_url=server.url, checksums=sums,
                      progress=False)
    assert _files(isolated / "root") == []


def test_download_file_success_replaces_atomically(server, isolated):
    payload = os.urandom(200_000)
    server.files["big.bin"] = payload
    dest = isolated / "dl" / "big.bin"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    assert download_file(server.url + "big.bin", dest, _sha(payload), progress=False) == dest
    assert dest.read_bytes() == payload
    assert _files(isolated / "dl") == ["big.bin"]


def test_missing_remote_file_and_offline_errors(server, fixture_files, isolated):
    sums = {name: _sha(data) for name, data in fixture_files.items()}
    with pytest.raises(DatasetNotFoundError, match="val.fr.gz not found in") as info:
        load_multi30k("val", "fr", "en", root=isolated / "r", base_url=server.url,
                      checksums=sums, progress=False)  # the fixtures have no French
    assert "404" in str(info.value)
    assert _files(isolated / "r") == []
    with pytest.raises(DatasetNotFoundError) as info:
        load_multi30k("val", root=isolated / "r2", download=False)
    message = str(info.value)
    assert str(isolated / "r2") in message and str(default_cache_dir()) in message
    assert "MINITRANSFORMER_DATA" in message
    assert not (isolated / "r2").exists()


def test_unreachable_server_gives_clear_error(isolated):
    with pytest.raises(DatasetNotFoundError, match="download failed"):
        load_multi30k("val", root=isolated / "r", base_url="http://127.0.0.1:9/",
                      progress=False)


# --- finding files -----------------------------------------------------------


def _write(folder: Path, split: str, de: list[str], en: list[str], gz: bool = True) -> None:
    """A corpus of our own under Multi30k's names, listed in the folder's SHA256SUMS."""
    folder.mkdir(parents=True, exist_ok=True)
    for lang, lines in (("de", de), ("en", en)):
        data = "".join(line + "\n" for line in lines).encode()
        path = folder / (f"{split}.{lang}.gz" if gz else f"{split}.{lang}")
        path.write_bytes(gzip.compress(data) if gz else data)
        with open(folder / "SHA256SUMS", "a") as sums:
            sums.write(f"{_sha(path.read_bytes())}  {path.name}\n")


def test_search_order_root_env_cache(isolated, monkeypatch):
    _write(isolated / "root", "val", ["r"], ["R"])
    _write(isolated / "env" / "multi30k", "val", ["e"], ["E"])
    _write(default_cache_dir(), "val", ["c"], ["C"])
    monkeypatch.setenv("MINITRANSFORMER_DATA", str(isolated / "env"))
    assert load_multi30k("val", root=isolated / "root", download=False) == [("r", "R")]
    assert load_multi30k("val", download=False) == [("e", "E")]
    monkeypatch.delenv("MINITRANSFORMER_DATA")
    assert load_multi30k("val", download=False) == [("c", "C")]
    # English → German works by swapping the sides.
    assert load_multi30k("val", "en", "de", download=False) == [("C", "c")]


def test_plain_text_files_and_mismatched_lengths(isolated):
    _write(isolated / "plain", "train", ["a", "b"], ["A", "B"], gz=False)
    assert load_multi30k("train", root=isolated / "plain", download=False) == [
        ("a", "A"), ("b", "B"),
    ]
    _write(isolated / "bad", "train", ["a", "b"], ["A"])
    with pytest.raises(ValueError, match="lines"):
        load_multi30k("train", root=isolated / "bad", download=False)


def test_argument_errors(isolated):
    with pytest.raises(ValueError, match="split"):
        load_multi30k("dev", download=False)
    with pytest.raises(ValueError, match="tgt_lang"):
        load_multi30k("val", "de", "cs", download=False)
    with pytest.raises(ValueError, match="both"):
        load_multi30k("val", "de", "de", download=False)


def test_pinned_urls_and_checksums_cover_every_file():
    assert MULTI30K_URL.startswith("https://raw.githubusercontent.com/multi30k/dataset/")
    assert MULTI30K_URL.endswith("data/task1/raw/")
    names = {f"{s}.{lang}" for s in MULTI30K_SPLITS for lang in MULTI30K_LANGS}
    assert set(MULTI30K_SHA256) == names | {name + ".gz" for name in names}  # and decompressed
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in MULTI30K_SHA256.values())


# --- the real corpus ---------------------------------------------------------

_DATA = os.environ.get("MINITRANSFORMER_DATA")
_REAL = Path(_DATA) / "multi30k" if _DATA else None
needs_corpus = pytest.mark.skipif(
    _REAL is None or not (_REAL / "train.de.gz").is_file(),
    reason="the Multi30k corpus is not in $MINITRANSFORMER_DATA/multi30k "
    "(set MINITRANSFORMER_DATA to the folder that contains multi30k/)",
)


@needs_corpus
def test_real_corpus_checksums_match_pins():
    for name, digest in MULTI30K_SHA256.items():
        if name.endswith(".gz"):
            assert _sha((_REAL / name).read_bytes()) == digest, name
        else:
            assert _sha(gzip.decompress((_REAL / (name + ".gz")).read_bytes())) == digest, name


@pytest.mark.slow
@needs_corpus
def test_real_corpus_sizes_and_vocabularies():
    sizes = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}
    for split, n in sizes.items():
        pairs = load_multi30k(split, download=False)
        assert len(pairs) == n
        assert all(s.strip() and t.strip() for s, t in pairs)
    train = load_multi30k("train", download=False)
    src_vocab, tgt_vocab = build_vocabs(train, min_freq=2)
    # German has more word forms than English.
    assert 5_500 <= len(tgt_vocab) < len(src_vocab) <= 8_500
    assert load_multi30k("val", "de", "fr", download=False)[0][0] == load_multi30k(
        "val", download=False)[0][0]
