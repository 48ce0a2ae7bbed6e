"""The data container (deqlab/data/labelled.py): shapes checked, duplicates warned about,
moves between dtypes, and its provenance as JSON."""

import json

import pytest
import torch

from deqlab.data import (
    DataInfo,
    LabelledData,
)

INFO = DataInfo(source="test", seed=0, labels="gaussian", normalized=False, classes=(3, 8))


def test_labelled_data_checks_shapes_warns_on_duplicates_and_moves():
    X = torch.randn(4, 6)
    with pytest.raises(ValueError, match=r"`y` must have shape \(n,\) or \(q, n\) with n = 6"):
        LabelledData(X=X, y=torch.zeros(5), name="t", info=INFO)
    with pytest.raises(ValueError, match=r"`X` must be 2-D \(d, n\)"):
        LabelledData(X=X[0], y=torch.zeros(6), name="t", info=INFO)
    X[:, 5] = X[:, 2]
    data = LabelledData(X=X, y=torch.zeros(6), name="twins", info=INFO)
    assert (data.d, data.n) == (4, 6)
    with pytest.warns(UserWarning, match=r"twins: 1 duplicate input\(s\).*λ\* = 0"):
        assert data.diagnostics.n_duplicates == 1
    assert data.diagnostics is data.diagnostics  # computed once
    single = data.to(dtype=torch.float32)
    assert single.X.dtype == single.y.dtype == torch.float32 and single.info is INFO
    indexed = LabelledData(X=X, y=torch.arange(6), name="t", info=INFO).to(dtype=torch.float32)
    assert indexed.y.dtype == torch.int64  # integer labels keep their type
    assert json.loads(json.dumps(INFO.as_dict()))["classes"] == [3, 8]
