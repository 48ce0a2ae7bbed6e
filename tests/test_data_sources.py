"""The canonical sources (deqlab/data/sources.py): every set with its mirrors, md5 digests
and the published sizes."""

from deqlab.data import SOURCES


def test_canonical_sources_are_complete():
    assert list(SOURCES) == [
        "mnist",
        "fashion-mnist",
        "kmnist",
        "cifar10",
        "cifar100",
        "svhn",
        "semeion",
    ]
    for name, source in SOURCES.items():
        assert source.mirrors and all(m.endswith("/") for m in source.mirrors)
        for file in source.files:
            assert file.algorithm == "md5" and len(file.digest) == 32
            int(file.digest, 16)
            # published sizes are known for all but SEMEION (checked by content instead)
            assert (file.size is None) == (name == "semeion")
            assert file.size is None or file.size > 1000
