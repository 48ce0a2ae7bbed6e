"""What ``deqlab data list`` shows: every data set and split, and whether it can be read.

A split is ``present`` only when its files can be used: a file that has the published size
(:data:`~deqlab.data.sources.SOURCES`) is taken as intact without being read — a stat, so
listing stays instant —, and with ``checksums=True`` its digest is compared too. Any other
file (a size that differs, no published size, an extracted directory) is checked by its
content: a ``.gz`` file must decompress to its end (a truncated archive fails here even
when the members of one split come before the cut), and the split must load. Statuses:

- ``generated``: synthetic (``sphere``);
- ``present``: on disk and readable (``detail`` notes a file that differs from the
  published one but reads correctly, e.g. a subset written by the user);
- ``missing``: not on disk — ``fetch`` is the command that downloads it;
- ``incomplete``: not on disk but a download stopped half-way (a ``.part`` file) —
  ``fetch`` resumes it;
- ``corrupt``: on disk but truncated or damaged — ``detail`` says which file and what is
  wrong, ``fetch`` downloads a verified copy.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from deqlab.data import cifar, semeion, svhn
from deqlab.data.download import file_digest
from deqlab.data.locate import DatasetNotFoundError, data_root, fetch_command
from deqlab.data.registry import (
    _IDX_FILES,
    IDX_DATASETS,
    IMAGE_DATASETS,
    dataset_splits,
    load_images,
    locate,
    stored_files,
)
from deqlab.data.sources import SOURCES, RemoteFile, Source

STATUSES = ("generated", "present", "missing", "incomplete", "corrupt")
SPHERE_LOCATION = "synthetic (Ling et al. 2023, Section 5)"


@dataclass(frozen=True)
class CatalogEntry:
    """The state of one split of one data set on this machine."""

    name: str
    split: str | None  # None for the generated "sphere"
    status: str  # one of STATUSES
    location: str | None  # the stored split (or the .part of a stopped download)
    fetch: str | None  # the command that downloads (or resumes, or replaces) it
    detail: str | None = None  # what is wrong, or a note on a file that is not the published one

    def as_dict(self) -> dict[str, object]:
        """The fields as a plain dict (JSON-friendly)."""
        return asdict(self)


def _download_names(name: str, split: str) -> tuple[str, ...]:
    """The names ``deqlab data fetch`` downloads the split's data to."""
    if name in IDX_DATASETS:
        return tuple(f"{stem}.gz" for stem in _IDX_FILES[split])
    if name == "cifar10":
        return (cifar.ARCHIVE,)
    if name == "cifar100":
        return (cifar.CIFAR100_ARCHIVE,)
    if name == "svhn":
        return (svhn.SPLIT_FILES[split],)
    if name == "semeion":
        return (semeion.FILENAME,)
    return ()


def _gzip_problem(path: Path) -> str | None:
    """Why the gzip stream of ``path`` cannot be read to its end (None: it can)."""
    if path.stat().st_size == 0:
        return f"{path} is empty"
    try:
        with gzip.open(path, "rb") as stream:
            while stream.read(1 << 22):
                pass
    except EOFError:
        return f"{path} is a truncated gzip file (the compressed stream ends early)"
    except (OSError, zlib.error) as err:  # BadGzipFile (CRC, length) is an OSError
        return f"{path} is not a readable gzip file: {err}"
    return None


def _missing(name: str, split: str, data_dir, err: DatasetNotFoundError) -> CatalogEntry:
    command = fetch_command(name, data_dir)
    target = data_root(data_dir) / name
    for filename in _download_names(name, split):
        part = target / f"{filename}.part"
        if part.is_file():
            return CatalogEntry(
                name,
                split,
                "incomplete",
                str(part),
                command,
                f"download stopped after {part.stat().st_size} bytes of {filename}; "
                f"`{command}` resumes it",
            )
    notes = [line.strip()[len("note: ") :] for line in str(err).splitlines() if "note: " in line]
    return CatalogEntry(name, split, "missing", None, command, "; ".join(notes) or None)


def check_split(
    name: str,
    split: str = "train",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    checksums: bool = False,
    sources: Mapping[str, Source] | None = None,
) -> CatalogEntry:
    """The :class:`CatalogEntry` of one split (see the module docstring for the statuses).

    ``checksums=True`` also compares the digest of each file that has the published size
    (an MD5 of up to ~180 MB per file). ``sources`` replaces the table of published names,
    sizes and digests (:data:`~deqlab.data.sources.SOURCES`), as in :func:`fetch`.
    """
    if name == "sphere":
        return CatalogEntry(name, None, "generated", SPHERE_LOCATION, None)
    if split not in dataset_splits(name):
        raise ValueError(f"{name!r} has no {split!r} split; its splits: {dataset_splits(name)}")
    if name == "digits":
        where = str(locate(name, split))
        return CatalogEntry(name, split, "present", where, None, "bundled with scikit-learn")
    try:
        files = stored_files(name, split, data_dir)
    except DatasetNotFoundError as err:
        return _missing(name, split, data_dir, err)
    command = fetch_command(name, data_dir)
    table = SOURCES if sources is None else sources
    published = {f.filename: f for f in table[name].files} if name in table else {}
    where = str(locate(name, split, data_dir))
    # fetch replaces a file it downloads (its digest differs); anything else must go first
    advice = (
        f"`{command}` replaces it"
        if any(path.name in published for path in files)
        else f"remove it, then `{command}`"
    )
    notes: list[str] = []
    unverified = False  # some file must be read to know whether the split is usable
    for path in files:
        remote: RemoteFile | None = published.get(path.name)
        size = path.stat().st_size
        if remote is not None and remote.size in (None, size):
            if checksums:
                got = file_digest(path, remote.algorithm)
                if got == remote.digest.lower():
                    continue  # the published file
                if remote.size is not None:  # the published size, other bytes
                    return CatalogEntry(
                        name,
                        split,
                        "corrupt",
                        where,
                        command,
                        f"{path}: {remote.algorithm} checksum mismatch (expected "
                        f"{remote.digest.lower()}, got {got}); `{command}` replaces it",
                    )
                notes.append(f"{path.name} differs from the published file ({remote.algorithm})")
            elif remote.size is not None:
                continue  # the published size: taken as intact without reading it
        elif remote is not None:
            notes.append(f"{path.name} has {size} bytes, the published file {remote.size}")
        unverified = True
        if path.suffix == ".gz" and (problem := _gzip_problem(path)) is not None:
            detail = "; ".join([problem, *notes, advice])
            return CatalogEntry(name, split, "corrupt", where, command, detail)
    if unverified:
        try:
            load_images(name, split, data_dir)
        except (ValueError, OSError) as err:
            detail = "; ".join([str(err), *notes, advice])
            return CatalogEntry(name, split, "corrupt", where, command, detail)
    return CatalogEntry(name, split, "present", where, None, "; ".join(notes) or None)


def catalog(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    checksums: bool = False,
    sources: Mapping[str, Source] | None = None,
) -> list[CatalogEntry]:
    """Every data set (``sphere``, then each image set), split by split.

    One :class:`CatalogEntry` per split (``sphere``: one, ``digits`` and ``semeion``: their
    single ``train`` split). What ``deqlab data list`` prints.
    """
    entries = [check_split("sphere")]
    for name in IMAGE_DATASETS:
        for split in dataset_splits(name):
            entries.append(check_split(name, split, data_dir, checksums=checksums, sources=sources))
    return entries
