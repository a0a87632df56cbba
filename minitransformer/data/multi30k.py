"""The Multi30k corpus (Elliott et al., 2016): image captions in German, English, French.

29,000 training, 1,014 validation and 1,000 test (``test_2016_flickr``)
sentence pairs, the corpus of WMT16's multimodal translation task and of many
small Transformer tutorials.

:func:`load_multi30k` finds the raw files ``{split}.{lang}.gz`` (plain
``{split}.{lang}`` works too) in, in order:

1. the ``root`` argument,
2. ``$MINITRANSFORMER_DATA/multi30k``,
3. a user cache folder, ``$XDG_CACHE_HOME/minitransformer/multi30k``
   (default ``~/.cache/minitransformer/multi30k``),

and otherwise downloads them from the dataset's public repository
(``github.com/multi30k/dataset``, ``data/task1/raw/``) into ``root`` if given,
else the cache folder. Every download is checked against a pinned SHA-256 and
written atomically: bytes go to a temporary file in the same folder, which is
renamed only when complete and verified, so no partial or corrupt file is
ever left or used.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.request
from pathlib import Path

__all__ = [
    "MULTI30K_URL",
    "MULTI30K_SHA256",
    "MULTI30K_SPLITS",
    "MULTI30K_LANGS",
    "DatasetNotFoundError",
    "DownloadError",
    "default_cache_dir",
    "download_file",
    "load_multi30k",
]

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_LANGS = ("de", "en", "fr")
#: SHA-256 of the official raw files (computed from the copies this book was built with).
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}


class DatasetNotFoundError(FileNotFoundError):
    """The corpus is not on disk and could not be downloaded."""


class DownloadError(OSError):
    """A download failed: network error, truncated transfer or wrong checksum."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/minitransformer/multi30k`` (default ``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minitransformer" / "multi30k"


def _search_dirs(root: str | os.PathLike | None) -> list[Path]:
    dirs = []
    if root is not None:
        dirs.append(Path(root))
    env = os.environ.get("MINITRANSFORMER_DATA")
    if env:
        dirs.append(Path(env) / "multi30k")
    dirs.append(default_cache_dir())
    return dirs


def _find(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        for candidate in (d / name, d / name.removesuffix(".gz")):
            if candidate.is_file():
                return candidate
    return None


def download_file(
    url: str,
    dest: str | os.PathLike,
    sha256: str | None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically, checking its SHA-256.

    The bytes go to a temporary file next to ``dest``; it is renamed to
    ``dest`` (``os.replace``) only if the transfer is complete (as long as the
    server's Content-Length says) and the checksum matches. On any failure the
    temporary file is removed and :class:`DownloadError` is raised.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        received = 0
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                length = resp.headers.get("Content-Length")
                total = int(length) if length is not None else None
                with tqdm(
                    total=total, unit="B", unit_scale=True, desc=dest.name,
                    disable=not progress, leave=False,
                ) as bar:
                    while chunk := resp.read(1 << 16):
                        out.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        bar.update(len(chunk))
        except (OSError, ValueError, http.client.HTTPException) as err:
            # URLError is an OSError; a server that closes early raises
            # http.client.IncompleteRead (an HTTPException) or returns short.
            raise DownloadError(f"downloading {url} failed: {err!r}") from err
        if total is not None and received != total:
            raise DownloadError(
                f"downloading {url} failed: the transfer stopped after {received} of {total} bytes"
            )
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise DownloadError(
                f"downloading {url} failed: SHA-256 mismatch (expected {sha256}, "
                f"got {digest.hexdigest()}); the file was not kept"
            )
        os.replace(tmp, dest)
        return dest
    finally:
        tmp.unlink(missing_ok=True)


def _read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\r\n") for line in f]


def load_multi30k(
    split: str,
    src_lang: str = "de",
    tgt_lang: str = "en",
    root: str | os.PathLike | None = None,
    download: bool = True,
    *,
    base_url: str = MULTI30K_URL,
    checksums: dict[str, str] | None = None,
    progress: bool = True,
) -> list[tuple[str, str]]:
    """Load one split of Multi30k as (source sentence, target sentence) pairs.

    Args:
        split: ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test_2016_flickr"`` (1,000).
        src_lang, tgt_lang: two of ``"de"``, ``"en"``, ``"fr"``.
        root: a folder to look in first (and to download into, if given).
        download: if False, never use the network.
        base_url, checksums: where to download from and the SHA-256 sums to
            check (defaults: the official repository and :data:`MULTI30K_SHA256`;
            tests point them at a local server).
        progress: show a tqdm bar while downloading.

    Returns:
        The sentences as raw text (not tokenised), aligned line by line.
    """
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"load_multi30k: split must be one of {MULTI30K_SPLITS}, got {split!r}")
    for name, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if lang not in MULTI30K_LANGS:
            raise ValueError(f"load_multi30k: {name} must be one of {MULTI30K_LANGS}, got {lang!r}")
    if src_lang == tgt_lang:
        raise ValueError(f"load_multi30k: src_lang and tgt_lang are both {src_lang!r}")
    checksums = MULTI30K_SHA256 if checksums is None else checksums
    dirs = _search_dirs(root)
    target_dir = Path(root) if root is not None else default_cache_dir()
    sides = []
    for lang in (src_lang, tgt_lang):
        name = f"{split}.{lang}.gz"
        path = _find(name, dirs)
        if path is None:
            where = "\n".join(f"  {d}" for d in dirs)
            hint = (
                f"Multi30k file {name} not found. Looked in:\n{where}\n"
                f"Put the raw files ({split}.{src_lang}.gz, {split}.{tgt_lang}.gz, ...) from "
                f"{MULTI30K_URL} in one of these folders, or set MINITRANSFORMER_DATA to a "
                "folder that contains multi30k/."
            )
            if not download:
                raise DatasetNotFoundError(hint + " (download=False)")
            try:
                path = download_file(
                    base_url.rstrip("/") + "/" + name,
                    target_dir / name,
                    checksums.get(name),
                    progress=progress,
                )
            except DownloadError as err:
                raise DatasetNotFoundError(f"{hint}\nThe download failed: {err}") from err
        sides.append(_read_lines(path))
    src, tgt = sides
    if len(src) != len(tgt):
        raise ValueError(
            f"load_multi30k: {split}.{src_lang} has {len(src)} lines but "
            f"{split}.{tgt_lang} has {len(tgt)}; the files do not belong together"
        )
    return list(zip(src, tgt, strict=True))
