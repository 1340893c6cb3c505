"""Write one crabrec run's data as a bundle both TIGER implementations read (run with crabrec's environment).

    python benchmarks/tiger_reference/export.py RUN_DIR BUNDLE.npz

The bundle holds the run's exact split (each user's training sequence, whose every prefix is a training row; the
validation and test rows with their histories), the item text embeddings (a zero column for an ids-only run, whose
SIDs were imported) and the run's semantic IDs. Nothing else: the reference side never imports crabrec.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from crabrec.runfiles import RunFiles


def training_sequences(train) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(users, flat items, offsets)``: each user's training sequence, rebuilt from the rows (the first
    row's one-item history, then every row's target in order), checked against every row's history window."""
    users, starts = np.unique(train.user, return_index=True)
    order = np.argsort(starts)
    users, starts = users[order], starts[order]
    ends = np.append(starts[1:], len(train.user))
    width = train.history.shape[1]
    seqs: list[np.ndarray] = []
    for u, a, b in zip(users, starts, ends):
        if not (train.user[a:b] == u).all() or train.length[a] != 1:
            raise SystemExit("export: training rows are not grouped by user, first row with a one-item history")
        seq = np.concatenate([train.history[a, :1], train.target[a:b]])
        for r in range(a, b):  # every row is a prefix of the sequence, cut to the history window
            t = r - a + 1
            want = seq[max(0, t - width) : t]
            if not np.array_equal(train.history[r, : train.length[r]], want):
                raise SystemExit(f"export: row {r} is not a window of user {u}'s sequence")
        seqs.append(seq)
    lengths = np.array([len(s) for s in seqs])
    return users, np.concatenate(seqs), np.concatenate([[0], np.cumsum(lengths)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("bundle", type=Path)
    args = ap.parse_args(argv)
    files = RunFiles(args.run)
    splits = files.load_splits()
    codebook = files.load_codebook()
    users, flat, offsets = training_sequences(splits.train)
    emb_path = args.run / "embeddings.npy"
    # an ids-only run (imported SIDs, no item text) has no embeddings: cornac reads them only in its tokenizer, which
    # the harness replaces by the bundle's SIDs, so a zero column stands in
    emb = np.load(emb_path) if emb_path.exists() else np.zeros((len(codebook.codes), 1), np.float32)
    arrays = {
        "train_users": users,
        "train_items": flat,
        "train_offsets": offsets,
        "codes": codebook.codes.astype(np.int64),
        "level_sizes": np.asarray(codebook.sizes, np.int64),
        "embeddings": emb.astype(np.float32),
        "max_history": np.int64(splits.train.history.shape[1]),
    }
    for part in ("valid", "test"):
        rows = getattr(splits, part)
        arrays |= {f"{part}_{k}": getattr(rows, k) for k in ("user", "history", "length", "target")}
    if len(emb) != len(codebook.codes):
        raise SystemExit(f"export: {len(emb)} embeddings for {len(codebook.codes)} items")
    np.savez(args.bundle, **arrays)
    print(
        f"{args.bundle}: {len(users)} users, {len(flat)} training items, {len(codebook.codes)} items, "
        f"SID levels {list(codebook.sizes)}, history window {arrays['max_history']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
