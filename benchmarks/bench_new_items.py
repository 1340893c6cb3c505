"""Items that arrive after training (cold start): how often each generative method recommends them once they join
the catalogue with ``new_items``, against a text-similarity reference, and what adding them costs the other items.

    python benchmarks/bench_new_items.py [--data PATH] [--share 0.05] [--seed 0] [--runs runs/bench-new-items]

The embedded Office data (or ``--data``: any dataset with item text that crabrec reads, such as MovieLens-100K's
RecBole files) with a random ``--share`` of its items held out: every interaction with them is removed,
and a quick-preset run trains MOR, TIGER, CRAB, PPD and RR on the rest. The held-out items then join the trained
run as new items (their text only). Two groups of test users, each with their history as the run saw it (held-out
items removed), and the run's evaluation protocol (every item ranked, beam 20):

- cold: users whose last item (test) or last but one (validation) is a held-out one. Reported: HR@10 and NDCG@10
  of that item with the new items added (without them it cannot be recommended: 0), and, as a reference, the items
  whose text embeddings are nearest (cosine) to the history's last item's, among all items.
- warm: users whose last item is not held out (the run's own test rows). HR@10 without and with the new items
  added, and the new items' share of the top-10 slots.

Each method at ``new_share`` 0, 0.1 and 0.3, with new items placed after the generated SIDs that share their first
3, 2 or 1 tokens (crabrec matches on the first token, the best on validation here).

The held-out items are chosen by a seeded draw; the run is cached in ``--runs`` (a second call only ranks).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

METHODS = ("mor", "tiger", "crab", "ppd", "rr")
SHARES = (0.0, 0.1, 0.3)
STAGES = ("evaluate", "tiger-eval", "crab-eval", "ppd", "rr")


def read_data(data: str | None) -> tuple[dict, dict]:
    """``(sequences, item text)``: user id -> item ids (oldest first), item id -> text record; the embedded Office
    data's JSON as it is, else ``data`` as crabrec reads it (no k-core filter: the run applies its own)."""
    from crabrec.config import DataConfig
    from crabrec.data.loaders import embedded_path, load_dataset

    if data is None:
        src = embedded_path()
        return json.loads((src / "Office.inter.json").read_text()), json.loads((src / "Office.item.json").read_text())
    ds = load_dataset(DataConfig(path=data, kcore=0))
    inter = {user: [ds.item_ids[i] for i in seq.tolist()] for user, seq in zip(ds.users, ds.sequences)}
    return inter, dict(zip(ds.item_ids, ds.item_text))


def held_out_data(folder: Path, share: float, seed: int, data: str | None = None) -> tuple[Path, dict, dict, set[str]]:
    """The data without a seeded ``share`` of its items, as an LC-Rec folder; returns the folder, the original
    sequences and item text, and the held-out ids."""
    inter, items = read_data(data)
    ids = sorted(items, key=lambda i: (len(i), i))  # numeric ids in their numbers' order
    rng = np.random.default_rng(seed)
    held = {ids[i] for i in rng.choice(len(ids), round(share * len(ids)), replace=False)}
    folder.mkdir(parents=True, exist_ok=True)
    kept = {u: [i for i in seq if str(i) not in held] for u, seq in inter.items()}
    name = "OfficeHeldOut" if data is None else "HeldOut"
    (folder / f"{name}.inter.json").write_text(json.dumps({u: s for u, s in kept.items() if s}))
    (folder / f"{name}.item.json").write_text(json.dumps({k: v for k, v in items.items() if k not in held}))
    return folder, inter, items, held


def new_items_file(path: Path, items: dict, held: set[str]) -> Path:
    """The held-out items' text as a JSON-lines item table (an ``item_id`` and the text fields)."""
    with path.open("w", encoding="utf-8") as out:
        for item in sorted(held, key=lambda i: (len(i), i)):
            out.write(json.dumps({"item_id": item, **items[item]}) + "\n")
    return path


def hits(ranked: list[list[str]], targets: list[str], k: int = 10) -> tuple[float, float]:
    """HR@k and NDCG@k of one target per row."""
    hr = ndcg = 0.0
    for row, target in zip(ranked, targets):
        if target in row[:k]:
            hr += 1
            ndcg += 1 / math.log2(row.index(target) + 2)
    return hr / len(targets), ndcg / len(targets)


def nearest_text(run: Path, added, histories: list[list[str]], k: int = 10) -> list[list[str]]:
    """The reference: all items ranked by the cosine of their text embedding to the history's last item's."""
    order = json.loads((run / "embeddings.items.json").read_text())["item_ids"]
    vectors = np.concatenate([np.load(run / "embeddings.npy"), added.vectors])
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    names = [*map(str, order), *added.ids]
    row_of = {name: i for i, name in enumerate(names)}
    out = []
    for history in histories:
        scores = vectors @ vectors[row_of[history[-1]]]
        scores[row_of[history[-1]]] = -np.inf
        out.append([names[i] for i in np.argsort(-scores, kind="stable")[:k]])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="a dataset with item text (default: the embedded Office data)")
    parser.add_argument("--share", type=float, default=0.05, help="share of the items held out")
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out draw (and of the run)")
    parser.add_argument("--runs", default="runs/bench-new-items", help="where the run is kept")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for the run (0: automatic)")
    args = parser.parse_args()

    import crabrec
    from crabrec.new_items import NewItemSlots, read

    runs = Path(args.runs)
    folder, inter, items, held = held_out_data(runs / "data", args.share, args.seed, args.data)
    run = crabrec.run(data=folder, preset="quick", name="held-out", seed=args.seed, until=list(STAGES),
                      overrides={"runs_dir": str(runs)}, jobs=args.jobs)  # fmt: skip
    added = read(run, new_items_file(runs / "new_items.jsonl", items, held), progress=False)
    mor = crabrec.load(run, "mor")
    known, catalogue = mor.known_users().index, mor.index  # the run's users (TIGER reads their tokens) and items
    groups: dict[str, list] = {"cold valid": [], "cold test": [], "warm test": []}
    for user, seq in inter.items():
        seq = [str(i) for i in seq]
        if user not in known:
            continue
        for name, cut in (("cold valid", -2), ("cold test", -1)):  # the user's last but one, or last, item is new
            history = [i for i in seq[:cut] if i in catalogue]  # as the run saw it (its k-core filter dropped a few)
            if history and seq[cut] in held:
                groups[name].append((history, seq[cut], known[user]))
        history = [i for i in seq[:-1] if i in catalogue]
        if history and seq[-1] in catalogue:
            groups["warm test"].append((history, seq[-1], known[user]))
    counts = ", ".join(f"{len(rows)} {name}" for name, rows in groups.items())
    print(f"{len(held)} of {len(items)} items held out ({args.share:.0%}, seed {args.seed}); the run's catalogue: "
          f"{len(catalogue)} items; {len(added)} join it; test users: {counts}\n")
    new = set(added.ids)

    def ranked(rec, rows):
        histories, _, users = zip(*rows)
        found = rec.recommend_batch(list(histories), 10, users=list(users), exclude_seen=False)
        return [[r.item for r in row] for row in found]

    print("| method | tokens shared | new_share | cold valid HR@10 | cold test HR@10 | cold test NDCG@10 | "
          "warm test HR@10 | new items' top-10 share (warm) |")
    print("|---|---|---|---|---|---|---|---|")
    targets = {name: [t for _, t, _ in rows] for name, rows in groups.items()}
    warm_targets = targets["warm test"]
    for method in METHODS:
        plain = hits(ranked(crabrec.load(run, method), groups["warm test"]), warm_targets)[0]
        print(f"| {method} | – | no new items | – | – | – | {plain:.4f} | – |")
        for depth in (3, 2, 1):
            for share in SHARES:
                rec = crabrec.load(run, method, new_items=added, new_share=share)
                rec.ranker = NewItemSlots(rec.ranker.base, len(catalogue), share, depth)  # the tokens matched
                cells = [hits(ranked(rec, groups[g]), targets[g]) for g in ("cold valid", "cold test")]
                warm = ranked(rec, groups["warm test"])
                taken = sum(item in new for row in warm for item in row) / sum(len(row) for row in warm)
                print(f"| {method} | {depth} | {share} | {cells[0][0]:.4f} | {cells[1][0]:.4f} | {cells[1][1]:.4f} | "
                      f"{hits(warm, warm_targets)[0]:.4f} | {taken:.4f} |", flush=True)
    cold = groups["cold test"]
    text_hr, text_ndcg = hits(nearest_text(run, added, [h for h, _, _ in cold]), targets["cold test"])
    print(f"| nearest text (reference) | – | – | – | {text_hr:.4f} | {text_ndcg:.4f} | – | – |")
    print(f"| a random item (expected) | – | – | – | {10 / len(catalogue):.4f} | – | – | – |")


if __name__ == "__main__":
    main()
