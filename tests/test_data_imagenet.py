"""The ImageNet reader (deqlab/data/imagenet.py) on a fake image folder: a one-line error
where it is missing, centre crops and labels by class folder, too few images named."""

import pytest

from deqlab.data.imagenet import imagenet_dir, read_imagenet
from deqlab.data.locate import DatasetNotFoundError
from helpers import fake_imagenet


def test_imagenet_reader_crops_and_labels_an_image_folder(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="data set 'imagenet' not found") as err:
        imagenet_dir(tmp_path)
    assert "\n" not in str(err.value)
    fake_imagenet(tmp_path)
    images, labels = read_imagenet("val", classes=2, n_per_class=3, size=16, data_dir=tmp_path)
    assert images.shape == (6, 3, 16, 16) and labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert (
        float(images[:3].max()) < 5 / 255 + 1e-6 and abs(float(images[3:].mean()) - 62 / 255) < 0.01
    )
    with pytest.raises(ValueError, match="`n_per_class` = 5 exceeds the 4 images"):
        read_imagenet("train", classes=1, n_per_class=5, size=8, data_dir=tmp_path)
