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

Files already on disk are verified too, before they are read: against the
pinned SHA-256 of the official file (compressed or plain), or, for a corpus
of your own under these names, against a ``SHA256SUMS`` file in the same
folder (the output of ``sha256sum *.gz``). A verified file is not hashed
again while its size and modification time stay the same. A file that does
not match (another language's file under this name, a truncated or damaged
copy) or cannot be read as UTF-8 text raises :class:`CorpusError` with one
line naming the file and what to do.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.request
import zlib
from pathlib import Path

__all__ = [
    "MULTI30K_URL",
    "MULTI30K_SHA256",
    "MULTI30K_SPLITS",
    "MULTI30K_LANGS",
    "DatasetNotFoundError",
    "DownloadError",
    "CorpusError",
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
    # the same files decompressed (read when a folder holds plain {split}.{lang} files)
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test_2016_flickr.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
}
#: The name of a folder's own list of checksums (``sha256sum``'s format).
CHECKSUM_FILE = "SHA256SUMS"


class DatasetNotFoundError(FileNotFoundError):
    """The corpus is not on disk and could not be downloaded."""


class DownloadError(OSError):
    """A download failed: network error, truncated transfer or wrong checksum."""


class CorpusError(ValueError):
    """A corpus file on disk is unusable: wrong checksum, unreadable, or not
    aligned with its other side."""


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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


#: (file, size, mtime) → SHA-256 of the files hashed in this process. The
#: official files are small (a few MB), so a cache on disk would save little;
#: this one spares the repeated loads of a notebook or a test run.
_HASHED: dict[tuple[str, int, int], str] = {}


def _cached_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        _HASHED[key] = _sha256(path)
    return _HASHED[key]


def _listed_sums(folder: Path) -> dict[str, str]:
    """``name → sha256`` from ``folder/SHA256SUMS`` (empty if there is none)."""
    listing = folder / CHECKSUM_FILE
    if not listing.is_file():
        return {}
    sums = {}
    for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
        digest, _, name = line.strip().partition(" ")
        if len(digest) == 64 and name:
            sums[name.strip().lstrip("*")] = digest.lower()
    return sums


def _verify(path: Path, checksums: dict[str, str]) -> None:
    """Raise :class:`CorpusError` if ``path`` does not have its expected SHA-256
    (from the folder's ``SHA256SUMS``, else ``checksums``; none known: accepted)."""
    listed = _listed_sums(path.parent)
    expected = listed.get(path.name) or checksums.get(path.name)
    if expected is None or _cached_sha256(path) == expected.lower():
        return
    if path.name in listed:
        raise CorpusError(
            f"{path} does not match its SHA-256 in {path.parent / CHECKSUM_FILE}: the file "
            f"changed or is damaged; restore it or update the list"
        )
    raise CorpusError(
        f"{path} is not the official Multi30k {path.name} (SHA-256 mismatch: another "
        f"language's file, a truncated or damaged copy?); delete it to download it again, or "
        f"for a corpus of your own list its sums in {path.parent / CHECKSUM_FILE}"
    )


def _read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset "
            f"{err.start}; Latin-1?); convert it to UTF-8 or replace it"
        ) from None
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise CorpusError(
            f"{path} cannot be read ({type(err).__name__}: {err or 'unexpected end'}; "
            f"truncated or not gzip?); delete it to download it again"
        ) from None


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
            check downloads and files on disk against (defaults: the official
            repository and :data:`MULTI30K_SHA256`; tests point them at a local
            server). A folder's own ``SHA256SUMS`` takes precedence for its files.
        progress: show a tqdm bar while downloading.

    Returns:
        The sentences as raw text (not tokenised), aligned line by line.

    Raises:
        DatasetNotFoundError: a file is missing and could not be downloaded.
        CorpusError: a file on disk is not the expected one, cannot be read
            as UTF-8 text, or the two sides have different numbers of lines.
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
    sides, paths = [], []
    for lang in (src_lang, tgt_lang):
        name = f"{split}.{lang}.gz"
        path = _find(name, dirs)
        if path is None:
            where = ", ".join(str(d) for d in dirs)
            hint = (
                f"Multi30k file {name} not found in {where}; put the raw files "
                f"({split}.{src_lang}.gz, {split}.{tgt_lang}.gz, ...) from {MULTI30K_URL} in "
                "one of these folders, or set MINITRANSFORMER_DATA to a folder that contains "
                "multi30k/"
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
                raise DatasetNotFoundError(f"{hint}; the download failed: {err}") from err
        _verify(path, checksums)
        lines = _read_lines(path)
        if not lines:
            listed = (f", though {path.parent / CHECKSUM_FILE} lists it"
                      if path.name in _listed_sums(path.parent) else "")
            raise CorpusError(f"{path} holds no lines{listed}; expected one sentence per "
                              "line (replace it with the real file)")
        sides.append(lines)
        paths.append(path)
    src, tgt = sides
    if len(src) != len(tgt):
        raise CorpusError(
            f"load_multi30k: {paths[0]} has {len(src)} lines but {paths[1]} has {len(tgt)}; "
            "the files do not belong together"
        )
    return list(zip(src, tgt, strict=True))
