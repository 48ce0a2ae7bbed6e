"""Data sets: synthetic generators, MNIST / Fashion-MNIST / KMNIST / CIFAR-10 / CIFAR-100 /
SVHN / SEMEION / digits readers, downloads with checksums, the catalog of what is on disk,
and the preprocessing of the papers.
"""

from deqlab.data.cifar import (
    CifarFormatError,
    read_cifar10,
    read_cifar100,
    read_cifar100_meta,
    write_cifar100_file,
    write_cifar100_meta,
    write_cifar_batch,
)
from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics
from deqlab.data.download import ChecksumError, DownloadError, download_file, fetch, file_digest
from deqlab.data.idx import IdxFormatError, read_idx, write_idx
from deqlab.data.inventory import CatalogEntry, catalog, check_split
from deqlab.data.labelled import DataInfo, LabelledData
from deqlab.data.locate import DatasetNotFoundError, data_root, search_dirs
from deqlab.data.preprocess import normalize_columns, to_grayscale
from deqlab.data.registry import (
    DATASETS,
    RawImages,
    dataset_splits,
    get_dataset,
    load_images,
    locate,
    n_classes,
)
from deqlab.data.semeion import SemeionFormatError, read_semeion, write_semeion
from deqlab.data.sources import SOURCES, RemoteFile, Source
from deqlab.data.svhn import SvhnFormatError, read_svhn, write_svhn
from deqlab.data.synthetic import synthetic_sphere, zou_synthetic

__all__ = [
    "DATASETS",
    "SOURCES",
    "CatalogEntry",
    "ChecksumError",
    "CifarFormatError",
    "DataInfo",
    "DatasetNotFoundError",
    "DownloadError",
    "IdxFormatError",
    "InputDiagnostics",
    "LabelledData",
    "RawImages",
    "RemoteFile",
    "SemeionFormatError",
    "Source",
    "SvhnFormatError",
    "catalog",
    "check_split",
    "data_root",
    "dataset_splits",
    "download_file",
    "fetch",
    "file_digest",
    "get_dataset",
    "input_diagnostics",
    "load_images",
    "locate",
    "n_classes",
    "normalize_columns",
    "read_cifar10",
    "read_cifar100",
    "read_cifar100_meta",
    "read_idx",
    "read_semeion",
    "read_svhn",
    "search_dirs",
    "synthetic_sphere",
    "to_grayscale",
    "write_cifar100_file",
    "write_cifar100_meta",
    "write_cifar_batch",
    "write_idx",
    "write_semeion",
    "write_svhn",
    "zou_synthetic",
]
