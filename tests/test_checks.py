"""deqlab._checks: the finiteness check (min and max propagate NaN and ±inf) in every dtype a
caller may pass, and the message counting the bad entries."""

import pytest
import torch

from deqlab._checks import check_tensor

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_entry_anywhere_is_refused_and_counted(dtype, bad):
    x = torch.zeros(4, 5, dtype=dtype)
    assert check_tensor("x", x) is x
    for where in ((0, 0), (3, 4), (2, 1)):
        y = x.clone()
        y[where] = bad
        with pytest.raises(ValueError, match="`x` must be finite; got 1 NaN/Inf entries"):
            check_tensor("x", y)
        with pytest.raises(ValueError, match="must be finite"):
            check_tensor("x", y.T)  # a non-contiguous view


def test_other_dtypes_zero_d_and_tensors_that_require_grad():
    assert check_tensor("i", torch.tensor([1, 2]), floating=False).dtype == torch.int64
    assert check_tensor("b", torch.tensor([True]), floating=False).dtype == torch.bool
    assert check_tensor("s", torch.tensor(2.0)).ndim == 0
    check_tensor("w", torch.ones(3, requires_grad=True))
    check_tensor("c", torch.tensor([1 + 2j]), floating=False)  # complex: real and imaginary
    with pytest.raises(ValueError, match="`c` must be finite"):
        check_tensor("c", torch.tensor([complex(1, float("nan"))]), floating=False)
    with pytest.raises(ValueError, match="`s` must be finite"):
        check_tensor("s", torch.tensor(float("inf")))
