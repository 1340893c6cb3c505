"""Item text written in the interaction table (a play log's artist and track names) against the same log ids-only.

    python benchmarks/inline_item_text.py [--runs-dir /tmp/inline-text] [--encoder all-MiniLM-L6-v2] [--train]

The shared MovieLens-100K written as a Last.fm-1K-shaped play log (``plays.tsv``: user, ISO time, track id, the
artist named for the movie's first genre, the movie's title as the track), and the same log without the two name
columns. Without an item table, crabrec reads the names as the item text of the first (semantic IDs from the text
encoder) and the second is ids-only (semantic IDs from SASRec's item embeddings); a third run joins the names'
embeddings with SASRec's (``tokenize.item_vectors=text+sasrec``). The data, embed and tokenize stages run on each,
side by side; ``--train`` also trains and evaluates MOR on each (the quick preset, one thread each).

It prints, for each, how often two items under the same first SID token share a genre, against two items drawn at
random, and with ``--train`` MOR's best validation NDCG@10 (the comparison to choose by) and its test metrics.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
from item_text_numbers import SHARED, arguments, print_table, side_by_side


def write_plays(folder: Path) -> tuple[Path, Path, dict[str, set[str]]]:
    """The play log with names, the one without, and each item's genres."""
    src = SHARED / "datasets" / "ml-100k"
    items = pd.read_csv(src / "ml-100k.item", sep="\t", dtype=str)
    items.columns = [c.split(":")[0] for c in items.columns]
    genres = {i: set(str(g).split()) for i, g in zip(items["item_id"], items["class"], strict=True)}
    artist = {i: f"{str(g).split()[0]} Band" for i, g in zip(items["item_id"], items["class"], strict=True)}
    title = dict(zip(items["item_id"], items["movie_title"], strict=True))
    ratings = pd.read_csv(src / "ml-100k.inter", sep="\t", dtype=str)
    ratings.columns = ["user", "item", "rating", "timestamp"]
    plays = pd.DataFrame({
        "user": ratings["user"],
        "timestamp": [dt.datetime.fromtimestamp(float(t), dt.timezone.utc).isoformat() for t in ratings["timestamp"]],
        "track_id": ratings["item"], "artist_name": ratings["item"].map(artist),
        "track_name": ratings["item"].map(title),
    })  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    named, bare = folder / "plays.tsv", folder / "plays_ids.tsv"
    plays.to_csv(named, sep="\t", index=False)
    plays[["user", "timestamp", "track_id"]].to_csv(bare, sep="\t", index=False)
    return named, bare, genres


def main() -> None:
    args = arguments(__doc__, "/tmp/inline-text")
    runs = Path(args.runs_dir)
    named, bare, genres = write_plays(runs / "data")
    variants = {
        "artist and track names in the log (read as item text)": ["--data", str(named)],
        "ids only (SASRec item embeddings)": ["--data", str(bare)],
        "names, text + SASRec item vectors": ["--data", str(named), "--set", "tokenize.item_vectors=text+sasrec"],
    }
    done = side_by_side(variants, runs, args.train, args.encoder)
    print_table("play log", done, genres, args.train)


if __name__ == "__main__":
    main()
