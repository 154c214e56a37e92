"""Grouping identical rows (eqarena/solvers/_rows.py) against `np.unique(axis=0)`."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena.solvers._rows import identical_rows

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(5))
def test_groups_and_order_match_numpy_unique(seed):
    rng = np.random.default_rng(seed)
    distinct = rng.integers(-2, 3, size=(12, 7)) / 2.0
    rows = distinct[rng.integers(0, 12, size=40)]
    rows[rows == 0.0] *= np.where(rng.random((rows == 0.0).sum()) < 0.5, -1.0, 1.0)  # some -0.0
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    sorted_first, sorted_labels = identical_rows(rows, lexicographic=True)
    np.testing.assert_array_equal(sorted_first, first)
    np.testing.assert_array_equal(sorted_labels, inverse.reshape(-1))
    seen_first, seen_labels = identical_rows(rows)
    np.testing.assert_array_equal(seen_first, np.sort(first))  # first occurrences, in order
    np.testing.assert_array_equal(rows[seen_first[seen_labels]], rows)  # each row's label names its copy
    assert len(set(map(bytes, (rows[seen_first] + 0.0)))) == len(seen_first)  # and the groups are distinct


def test_minus_zero_and_zero_are_one_row():
    first, labels = identical_rows(np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, -0.0]]))
    np.testing.assert_array_equal(first, [0, 2])
    np.testing.assert_array_equal(labels, [0, 0, 1])


@pytest.mark.parametrize("seed", range(3))
def test_large_arrays_grouped_by_hash_match_numpy_unique(seed):
    """Arrays of a bootstrap replicate's size take the hashed grouping: the same groups, in the same
    order, as np.unique (half-integer payoffs, whose words differ only in their high bits)."""
    rng = np.random.default_rng(seed)
    distinct = rng.integers(-2, 3, size=(150, 289)) / 2.0
    rows = distinct[rng.integers(0, 150, size=400)]
    rows[rows == 0.0] *= np.where(rng.random((rows == 0.0).sum()) < 0.5, -1.0, 1.0)
    assert rows.size >= 4096
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    sorted_first, sorted_labels = identical_rows(rows, lexicographic=True)
    np.testing.assert_array_equal(sorted_first, first)
    np.testing.assert_array_equal(sorted_labels, inverse.reshape(-1))
    seen_first, seen_labels = identical_rows(rows)
    np.testing.assert_array_equal(seen_first, np.sort(first))
    np.testing.assert_array_equal(rows[seen_first[seen_labels]], rows)


@pytest.mark.parametrize("seed", range(3))
def test_few_long_rows_sort_as_numpy_unique(seed):
    """A king's rows of a support sub-game: a few rows of thousands of entries that differ late."""
    rng = np.random.default_rng(seed)
    distinct = np.repeat(rng.integers(-1, 2, size=(1, 1050)) / 1.0, 4, axis=0)
    distinct[np.arange(4), 1000 + rng.permutation(4)] += 0.5  # each differs from the others only near the end
    rows = distinct[rng.integers(0, 4, size=9)]
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    sorted_first, sorted_labels = identical_rows(rows, lexicographic=True)
    np.testing.assert_array_equal(sorted_first, first)
    np.testing.assert_array_equal(sorted_labels, inverse.reshape(-1))
