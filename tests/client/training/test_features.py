"""The model's input from stored features: width, float32 rows, and the optional L1 row norm."""

from __future__ import annotations

import pytest
import torch

from graphstore.client.training import feature_width, prepare_features


def test_feature_width_is_the_product_of_the_per_node_dimensions():
    assert feature_width(torch.zeros(10, 16)) == 16
    assert feature_width(torch.zeros(10, 2, 3)) == 6
    assert feature_width(torch.zeros(10)) == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_stored_rows_become_float32_unchanged_without_a_norm(dtype):
    raw = torch.tensor([[1.0, -2.0, 0.5]], dtype=dtype)
    x = prepare_features(raw)
    assert x.dtype == torch.float32
    assert torch.equal(x, raw.float())


def test_row_norm_divides_each_row_by_its_l1_norm_and_keeps_zero_rows():
    raw = torch.tensor([[1.0, 0.0, 3.0], [0.0, 0.0, 0.0], [-2.0, 2.0, 0.0]])
    x = prepare_features(raw, "row")
    assert torch.allclose(x, torch.tensor([[0.25, 0.0, 0.75], [0.0, 0.0, 0.0], [-0.5, 0.5, 0.0]]))


def test_an_unknown_norm_is_named():
    with pytest.raises(ValueError, match="got 'l2'"):
        prepare_features(torch.ones(2, 2), "l2")
