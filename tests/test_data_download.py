"""fetch / download_file (deqlab/data/download.py) against a loopback HTTP server that
honours Range requests."""

import hashlib
import socket
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli.app import app
from deqlab.data import (
    SOURCES,
    ChecksumError,
    DownloadError,
    RemoteFile,
    Source,
    download_file,
    fetch,
    get_dataset,
    load_images,
    write_cifar100_file,
    write_cifar100_meta,
    write_idx,
    write_semeion,
    write_svhn,
)
from deqlab.data.registry import dataset_splits


class _Server(ThreadingHTTPServer):
    """Serves ``files`` (name → bytes); ``cut_after`` truncates the next response once."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.cut_after: int | None = None
        self.honour_range = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/data/"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self):
        name = self.path.removeprefix("/data/")
        self.server.requests.append((name, self.headers.get("Range")))
        if name not in self.server.files:
            self.send_error(404)
            return
        body = self.server.files[name]
        wanted = self.headers.get("Range")
        if wanted and self.server.honour_range:
            start = int(wanted.removeprefix("bytes=").removesuffix("-"))
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            body = body[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.server.cut_after is not None:  # announce everything, send a part, hang up
            body, self.server.cut_after = body[: self.server.cut_after], None
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def _md5(payload: bytes) -> str:
    return hashlib.md5(payload).hexdigest()


def _serve_mnist(server, tmp_path):
    """Four small IDX .gz files on the server, and a Source with their real MD5s."""
    rng = np.random.default_rng(0)
    staging = tmp_path / "staging"
    staging.mkdir()
    files = []
    for prefix, n in (("train", 30), ("t10k", 10)):
        labels = np.tile(np.arange(10, dtype=np.uint8), n // 10)
        images = rng.integers(1, 256, (n, 28, 28), dtype=np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            path = write_idx(staging / f"{prefix}-{kind}-ubyte.gz", array)
            server.files[path.name] = path.read_bytes()
            files.append(RemoteFile(path.name, _md5(path.read_bytes())))
    return Source(mirrors=(server.url,), files=tuple(files))


def _serve(server, staging):
    """Serve every file of ``staging``; a Source with their real MD5s and sizes."""
    files = []
    for path in sorted(staging.iterdir()):
        if path.is_file():
            server.files[path.name] = path.read_bytes()
            files.append(RemoteFile(path.name, _md5(path.read_bytes()), size=path.stat().st_size))
    return Source(mirrors=(server.url,), files=tuple(files))


def _stage(name, tmp_path):
    """The files of data set ``name`` as published (real formats, 20 images a split)."""
    rng = np.random.default_rng(len(name))
    staging = tmp_path / "staging" / name
    staging.mkdir(parents=True)
    labels = np.tile(np.arange(10), 2)
    if name == "kmnist":
        for prefix in ("train", "t10k"):
            images = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8)
            write_idx(staging / f"{prefix}-images-idx3-ubyte.gz", images)
            write_idx(staging / f"{prefix}-labels-idx1-ubyte.gz", labels.astype(np.uint8))
    elif name == "cifar100":
        folder = tmp_path / "staging" / "cifar-100-python"
        for split in ("train", "test"):
            images = rng.integers(0, 256, (20, 3, 32, 32), dtype=np.uint8)
            write_cifar100_file(folder / split, images, 5 * labels, labels)
        write_cifar100_meta(folder / "meta", [f"f{i}" for i in range(100)], ["c"] * 20)
        with tarfile.open(staging / "cifar-100-python.tar.gz", "w:gz") as archive:
            archive.add(folder, arcname="cifar-100-python")
    elif name == "svhn":
        for split in ("train", "test"):
            images = rng.integers(0, 256, (20, 3, 32, 32), dtype=np.uint8)
            write_svhn(staging / f"{split}_32x32.mat", images, labels)
    else:
        images = rng.integers(0, 2, (20, 1, 16, 16), dtype=np.uint8)
        write_semeion(staging / "semeion.data", images, labels)
    return staging


NEW_SETS = ("kmnist", "cifar100", "svhn", "semeion")


@pytest.mark.parametrize("name", NEW_SETS)
def test_fetch_new_sets_from_a_server_in_their_real_formats(server, tmp_path, name):
    source = _serve(server, _stage(name, tmp_path))
    root = tmp_path / "root"
    paths = fetch(name, root, sources={name: source}, show_progress=False)
    assert [p.name for p in paths] == [f.filename for f in source.files]
    for path in paths:
        assert path.parent == root / name and path.read_bytes() == server.files[path.name]
    assert not list((root / name).glob("*.part"))
    for split in dataset_splits(name):
        raw = load_images(name, split, data_dir=root)
        assert raw.images.shape[0] == 20 and raw.labels.shape == (20,)
        expected = np.tile(np.arange(10), 2) * (5 if name == "cifar100" else 1)  # fine labels
        np.testing.assert_array_equal(raw.labels, expected)
    classes = (0, 5) if name == "cifar100" else (0, 1)
    data = get_dataset(name, n_per_class=2, classes=classes, data_dir=root)
    assert data.X.shape[1] == 4 and data.info.source.startswith(str(root / name))
    n_requests = len(server.requests)  # verified files are not downloaded again
    fetch(name, root, sources={name: source}, show_progress=False)
    assert len(server.requests) == n_requests


@pytest.mark.parametrize("name", NEW_SETS)
def test_fetch_new_sets_rejects_a_checksum_mismatch(server, tmp_path, name):
    source = _serve(server, _stage(name, tmp_path))
    bad = source.files[-1].filename
    body, middle = server.files[bad], len(server.files[bad]) // 2
    server.files[bad] = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
    with pytest.raises(ChecksumError, match=rf"md5 checksum mismatch for {bad} \(\d+ bytes\)"):
        fetch(name, tmp_path / "root", sources={name: source}, show_progress=False)
    assert not (tmp_path / "root" / name / bad).exists()
    assert not list((tmp_path / "root" / name).glob("*.part"))
    twice = Source(mirrors=(server.url, server.url), files=source.files)
    with pytest.raises(ChecksumError, match=rf"every mirror failed for {bad}:\n  http"):
        fetch(name, tmp_path / "root", sources={name: twice}, show_progress=False)


def test_fetch_verifies_and_places_files_where_readers_look(server, tmp_path):
    source = _serve_mnist(server, tmp_path)
    paths = fetch("mnist", tmp_path / "root", sources={"mnist": source}, show_progress=False)
    assert [p.name for p in paths] == [f.filename for f in source.files]
    for path in paths:
        assert path.parent == tmp_path / "root" / "mnist"
        assert path.read_bytes() == server.files[path.name]
    assert not list((tmp_path / "root" / "mnist").glob("*.part"))
    data = get_dataset("mnist", n_per_class=3, data_dir=tmp_path / "root")
    assert data.X.shape == (784, 6)
    # present and verified: a second fetch downloads nothing
    n_requests = len(server.requests)
    fetch("mnist", tmp_path / "root", sources={"mnist": source}, show_progress=False)
    assert len(server.requests) == n_requests


def test_corrupted_download_is_a_checksum_error_and_not_kept(server, tmp_path):
    payload = bytes(range(256)) * 40
    server.files["blob.bin"] = payload[:-1] + b"\x00"  # one byte differs
    dest = tmp_path / "blob.bin"
    with pytest.raises(
        ChecksumError, match=f"expected {_md5(payload)}, got {_md5(server.files['blob.bin'])}"
    ):
        download_file(server.url + "blob.bin", dest, digest=_md5(payload))
    assert not dest.exists() and not (tmp_path / "blob.bin.part").exists()
    sha = hashlib.sha256(server.files["blob.bin"]).hexdigest()  # any hashlib algorithm
    assert download_file(server.url + "blob.bin", dest, digest=sha, algorithm="sha256") == dest


def test_truncated_transfer_keeps_the_part_and_the_next_fetch_resumes(server, tmp_path):
    payload = np.random.default_rng(1).integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    server.files["big.bin"] = payload
    source = Source(mirrors=(server.url,), files=(RemoteFile("big.bin", _md5(payload)),))
    server.cut_after = 12_345
    with pytest.raises(DownloadError, match="truncated transfer, received 12345 of 50000 bytes"):
        fetch("blob", tmp_path, sources={"blob": source}, show_progress=False)
    dest, part = tmp_path / "blob" / "big.bin", tmp_path / "blob" / "big.bin.part"
    assert not dest.exists() and part.read_bytes() == payload[:12_345]
    fetch("blob", tmp_path, sources={"blob": source})  # with the progress bar
    assert dest.read_bytes() == payload and not part.exists()
    assert server.requests == [("big.bin", None), ("big.bin", "bytes=12345-")]


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    payload = b"abcdefghij" * 1000
    server.files["f"] = payload
    server.honour_range = False
    (tmp_path / "f.part").write_bytes(b"stale bytes from elsewhere")
    download_file(server.url + "f", tmp_path / "f", digest=_md5(payload))
    assert (tmp_path / "f").read_bytes() == payload
    assert server.requests == [("f", "bytes=26-")]


def test_complete_part_is_verified_after_a_416(server, tmp_path):
    payload = b"0123456789" * 10
    server.files["f"] = payload
    (tmp_path / "f.part").write_bytes(payload)  # interrupted just before the rename
    download_file(server.url + "f", tmp_path / "f", digest=_md5(payload))
    assert (tmp_path / "f").read_bytes() == payload


def test_http_errors_and_mirror_fallback(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_file(server.url + "missing", tmp_path / "m", digest="0" * 32)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(DownloadError, match="Connection refused"):
        download_file(f"http://127.0.0.1:{closed}/x", tmp_path / "m", digest="0" * 32, timeout=5)
    server.files["g"] = b"payload"
    source = Source(
        mirrors=(server.url + "nowhere/", server.url), files=(RemoteFile("g", _md5(b"payload")),)
    )
    fetch("g", tmp_path, sources={"g": source}, show_progress=False)
    assert (tmp_path / "g" / "g").read_bytes() == b"payload"
    source = Source(
        mirrors=(server.url + "a/", server.url + "b/"), files=(RemoteFile("g", _md5(b"x")),)
    )
    with pytest.raises(DownloadError, match=r"every mirror failed for g:\n  .*/a/g: HTTP 404"):
        fetch("g", tmp_path, sources={"g": source}, show_progress=False)
    with pytest.raises(
        ValueError,
        match="`name` must be one of 'mnist', 'fashion-mnist', 'kmnist', 'cifar10', 'cifar100', "
        "'svhn', 'semeion'; got 'usps'",
    ):
        fetch("usps", tmp_path)


def test_cli_fetch(server, tmp_path, monkeypatch):
    source = _serve_mnist(server, tmp_path)
    monkeypatch.setitem(SOURCES, "mnist", source)
    runner = CliRunner()
    result = runner.invoke(app, ["data", "fetch", "mnist", "--dir", str(tmp_path / "root")])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "root" / "mnist" / "train-images-idx3-ubyte.gz") in result.output
    assert get_dataset("mnist", n_per_class=1, data_dir=tmp_path / "root").y.dtype == torch.float64
    server.files["t10k-labels-idx1-ubyte.gz"] = b"corrupted"
    (tmp_path / "root" / "mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    result = runner.invoke(
        app, ["data", "fetch", "mnist", "--dir", str(tmp_path / "root"), "--base-url", server.url]
    )
    assert result.exit_code != 0  # the code itself is the CLI's choice
    assert "md5 checksum mismatch for t10k-labels-idx1-ubyte.gz" in result.output
    result = runner.invoke(app, ["data", "fetch", "usps"])
    assert result.exit_code != 0 and "`name` must be one of" in result.output
