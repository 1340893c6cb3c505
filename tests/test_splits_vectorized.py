"""The vectorized split builders equal the row-by-row reference (the previous implementation) exactly."""

from __future__ import annotations

import numpy as np
import pytest

from crabrec.data.dataset import Dataset, Samples
from crabrec.data.splits import _global_time, _leave_one_out


def reference_leave_one_out(dataset: Dataset, h: int) -> dict[str, Samples]:
    rows = {k: ([], [], []) for k in ("train", "valid", "test")}
    for u, seq in enumerate(dataset.sequences):
        s = seq.tolist()
        for i in range(1, len(s)):
            name = "test" if i == len(s) - 1 else "valid" if i == len(s) - 2 else "train"
            rows[name][0].append(u)
            rows[name][1].append(s[max(0, i - h) : i])
            rows[name][2].append(s[i])
    return {k: Samples.from_rows(*v, max_history=h) for k, v in rows.items()}


def reference_global_time(dataset: Dataset, h: int) -> dict[str, Samples]:
    users, hists, targets, times = [], [], [], []
    for u, (seq, ts) in enumerate(zip(dataset.sequences, dataset.timestamps)):
        s = seq.tolist()
        for i in range(1, len(s)):
            users.append(u)
            hists.append(s[max(0, i - h) : i])
            targets.append(s[i])
            times.append(float(ts[i]))
    allrows = Samples.from_rows(users, hists, targets, max_history=h)
    order = np.argsort(np.asarray(times), kind="stable")
    a, b = int(0.8 * len(order)), int(0.9 * len(order))
    return {"train": allrows.take(order[:a]), "valid": allrows.take(order[a:b]), "test": allrows.take(order[b:])}


def random_dataset(seed: int, users: int) -> Dataset:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, users)
    seqs = [rng.integers(0, 50, n) for n in lengths]
    times = [np.sort(rng.integers(0, 100, n)).astype(np.float64) for n in lengths]  # many ties: stability matters
    return Dataset("r", "r", [str(i) for i in range(50)], [{}] * 50, [str(u) for u in range(users)], seqs, times)


@pytest.mark.parametrize(("seed", "h"), [(0, 10), (1, 3), (2, 1), (3, 40)])
def test_vectorized_splits_equal_the_reference(seed, h):
    ds = random_dataset(seed, 300)
    for fast, slow in ((_leave_one_out, reference_leave_one_out), (_global_time, reference_global_time)):
        got, want = fast(ds, h), slow(ds, h)
        for part in ("train", "valid", "test"):
            for key in ("user", "history", "length", "target"):
                a, b = getattr(got[part], key), getattr(want[part], key)
                assert a.dtype == b.dtype and np.array_equal(a, b), (fast.__name__, part, key)


def test_empty_and_single_item_users():
    ds = Dataset("e", "e", ["0", "1"], [{}, {}], ["a", "b"], [np.array([1]), np.array([0, 1])],
                 [np.array([1.0]), np.array([1.0, 2.0])])  # fmt: skip
    got = _leave_one_out(ds, 5)
    assert len(got["test"]) == 1 and got["test"].target.tolist() == [1] and got["test"].user.tolist() == [1]
    assert len(got["train"]) == 0 and got["train"].history.shape == (0, 5)
