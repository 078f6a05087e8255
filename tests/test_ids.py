"""ID normalisation and range checks shared by every layer (graphstore.ids)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.errors import IdTypeError
from graphstore.ids import as_id_array, check_id_range, first_outside


@pytest.mark.parametrize(
    "ids",
    [[3, 1, 2], (3, 1, 2), np.array([3, 1, 2], np.int32), torch.tensor([3, 1, 2]), np.array([[3, 1, 2]])],
)
def test_ids_of_any_form_become_one_dim_int64(ids):
    out = as_id_array(ids)
    assert out.dtype == np.int64 and out.ndim == 1
    np.testing.assert_array_equal(out, [3, 1, 2])


def test_an_int64_array_is_not_copied():
    ids = np.arange(5, dtype=np.int64)
    assert np.shares_memory(as_id_array(ids), ids)


def test_a_scalar_and_empty_inputs():
    np.testing.assert_array_equal(as_id_array(7), [7])
    assert as_id_array([]).dtype == np.int64 and as_id_array(torch.tensor([])).size == 0


@pytest.mark.parametrize("ids", [np.array([1.5]), torch.tensor([1.0, 2.0]), np.array([True, False])])
def test_non_integer_ids_raise_a_type_and_value_error_naming_the_argument(ids):
    with pytest.raises(IdTypeError, match="seeds: IDs must be integers") as info:
        as_id_array(ids, "seeds")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_one_dim_refuses_a_matrix():
    with pytest.raises(ValueError, match=r"nids: expected a 1-d array of IDs, got shape \[2, 2\]"):
        as_id_array(np.zeros((2, 2), np.int64), "nids", one_dim=True)


def test_first_outside_is_the_first_in_array_order():
    ids = np.array([5, 9, 12, -1, 3])
    assert first_outside(ids, 0, 10) == 12
    assert first_outside(ids, -1, 13) is None
    assert first_outside(np.empty(0, np.int64), 0, 1) is None


def test_range_check_names_the_bad_id_and_the_range():
    check_id_range(np.array([0, 9]), 10)
    with pytest.raises(IndexError, match=r"nodes contains ID 10, outside the valid range \[0, 10\)"):
        check_id_range(np.array([3, 10, 11]), 10, "nodes")
    with pytest.raises(IndexError, match="ID -2"):
        check_id_range(np.array([-2]), 10, "nodes")
