"""Downloads with checksums: resumable (HTTP Range into ``.part``), verified, atomic.

A file is streamed into ``<dest>.part``; after the last byte its digest is compared with
the published one, and only a verified file is moved onto ``<dest>`` (``os.replace``,
atomic), so a reader never picks up a partial or corrupted file. A transfer that stops
early keeps its ``.part`` and the next call resumes from its length with a
``Range: bytes=<offset>-`` request; a wrong digest deletes the ``.part``.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from deqlab._checks import check_choice, check_positive
from deqlab.data.locate import ENV_VAR, data_root
from deqlab.data.sources import SOURCES, RemoteFile, Source

_CHUNK = 1 << 16
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class DownloadError(RuntimeError):
    """A download that did not complete (network failure, truncated transfer, HTTP error)."""


class ChecksumError(DownloadError):
    """A downloaded file whose digest differs from the published one (it was deleted)."""


def file_digest(path: str | os.PathLike[str], algorithm: str = "md5") -> str:
    """Hex digest of a file, read in chunks."""
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _open(url: str, offset: int, timeout: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": "deqlab"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _resume_offset(response: http.client.HTTPResponse, offset: int, url: str) -> int:
    """Where the body of ``response`` starts: ``offset`` for a 206, 0 if Range was ignored."""
    if response.status != 206:
        return 0
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
    if match is None or int(match.group(1)) != offset:
        raise DownloadError(
            f"{url}: asked for bytes {offset}- but the server answered Content-Range "
            f"{response.headers.get('Content-Range')!r}"
        )
    return offset


def _stream(
    url: str, part: Path, timeout: float, progress: Progress | None, task: TaskID | None
) -> None:
    """Append the rest of ``url`` to ``part`` (resuming from its size); raise if cut short."""
    offset = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, offset, timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # nothing left to send: the .part is already whole
            return
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, OSError) as err:
        raise DownloadError(f"{url}: {getattr(err, 'reason', err)}") from err
    with response:
        start = _resume_offset(response, offset, url)
        length = response.headers.get("Content-Length")
        total = start + int(length) if length is not None else None
        received = start
        if progress is not None and task is not None:
            progress.update(task, total=total, completed=start)
        try:
            with open(part, "ab" if start else "wb") as out:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    received += len(chunk)
                    if progress is not None and task is not None:
                        progress.update(task, completed=received)
        except (OSError, http.client.HTTPException) as err:
            raise DownloadError(
                f"{url}: transfer interrupted after {received} bytes ({err}); "
                f"the partial file {part} is kept and the next fetch resumes from it"
            ) from err
    if total is not None and received < total:
        raise DownloadError(
            f"{url}: truncated transfer, received {received} of {total} bytes; "
            f"the partial file {part} is kept and the next fetch resumes from it"
        )


def download_file(
    url: str,
    dest: str | os.PathLike[str],
    *,
    digest: str,
    algorithm: str = "md5",
    timeout: float = 60.0,
    progress: Progress | None = None,
) -> Path:
    """Download ``url`` to ``dest``, verified against ``digest`` (hex, ``algorithm``).

    Resumes ``dest + ".part"`` when present. Raises :class:`DownloadError` when the
    transfer fails or stops early (the ``.part`` is kept) and :class:`ChecksumError` when
    the complete file has the wrong digest (the ``.part`` is deleted, ``dest`` untouched).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    task = progress.add_task(dest.name, total=None) if progress is not None else None
    _stream(url, part, timeout, progress, task)
    got = file_digest(part, algorithm)
    if got != digest.lower():
        size = part.stat().st_size
        part.unlink()
        raise ChecksumError(
            f"{url}: {algorithm} checksum mismatch for {dest.name} ({size} bytes): expected "
            f"{digest.lower()}, got {got}; the corrupted download was deleted"
        )
    os.replace(part, dest)
    return dest


def _fetch_one(
    file: RemoteFile,
    mirrors: tuple[str, ...],
    dest: Path,
    timeout: float,
    progress: Progress | None,
) -> Path:
    """Download one file, trying each mirror in turn (a ``.part`` carries over between them)."""
    errors: list[DownloadError] = []
    for base in mirrors:
        url = base.rstrip("/") + "/" + file.filename
        try:
            return download_file(
                url,
                dest,
                digest=file.digest,
                algorithm=file.algorithm,
                timeout=timeout,
                progress=progress,
            )
        except DownloadError as err:
            errors.append(err)
    if len(errors) == 1:
        raise errors[0]  # keeps its type: a ChecksumError stays one
    kind = ChecksumError if all(isinstance(e, ChecksumError) for e in errors) else DownloadError
    raise kind(
        f"every mirror failed for {file.filename}:\n  " + "\n  ".join(str(e) for e in errors)
    )


def fetch(
    name: str,
    dest_dir: str | os.PathLike[str] | None = None,
    *,
    base_url: str | None = None,
    sources: Mapping[str, Source] | None = None,
    timeout: float = 60.0,
    show_progress: bool = True,
) -> list[Path]:
    """Download data set ``name`` into ``<dest_dir>/<name>/`` (default root: see ``locate``).

    ``base_url`` replaces the mirrors of ``name``; ``sources`` replaces the whole table
    of :data:`deqlab.data.sources.SOURCES` (URLs and checksums). Files already present
    with the right digest are kept; others are downloaded, verified and moved into place.
    Returns the paths of the data set's files.
    """
    check_positive("timeout", timeout)
    table = SOURCES if sources is None else sources
    check_choice("name", name, list(table))
    source = table[name]
    mirrors = (base_url,) if base_url is not None else source.mirrors
    target = data_root(dest_dir) / name
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    present = {
        file.filename
        for file in source.files
        if (target / file.filename).is_file()
        and file_digest(target / file.filename, file.algorithm) == file.digest.lower()
    }
    created = _missing_dirs(target)
    paths = []
    try:
        if len(present) < len(source.files):
            check_writable(target)
        with Progress(*columns, disable=not show_progress) as progress:
            for file in source.files:
                dest = target / file.filename
                if file.filename in present:
                    paths.append(dest)
                    continue
                paths.append(_fetch_one(file, mirrors, dest, timeout, progress))
    except BaseException:
        _remove_empty(created)  # a failed fetch leaves no empty data/<name>/ behind
        raise
    return paths


def _missing_dirs(directory: Path) -> list[Path]:
    """``directory`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _remove_empty(directories: list[Path]) -> None:
    """Remove each of ``directories`` (deepest first) that exists and is empty; a directory
    holding a partial download (``.part``, kept to resume) stays, and so do its parents."""
    for directory in directories:
        try:
            directory.rmdir()
        except FileNotFoundError:  # never created
            continue
        except OSError:  # not empty: it and its parents stay
            return


def check_writable(directory: Path) -> None:
    """Create ``directory`` if needed and write (then remove) a temporary file in it.

    Raises ValueError (one line naming it) when that fails: a read-only place, a path
    through a file, no permission; checked before any download starts.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        raise ValueError(
            f"data directory {str(directory)!r} is not writable ({err.strerror or err}); "
            f"give a writable --dir, or set ${ENV_VAR}"
        ) from None
