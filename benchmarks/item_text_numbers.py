"""Columns of numbers and of codes in an item table's text: the semantic IDs with them embedded and left out.

    python benchmarks/item_text_numbers.py [--runs-dir /tmp/item-text] [--encoder all-MiniLM-L6-v2] [--train]

The shared MovieLens-100K written as a Goodbooks-shaped item table (``books.csv``: title, the genres as
``authors``, the year, and beside them ids, an ISBN-10 (some end in X: codes, not numbers), an ISBN-13, an average
rating and a ratings count drawn at random with seed 0, as Goodbooks ships such columns) with its ratings as the
interactions. The data, embed and tokenize stages run three times, side by side: with the default text, which leaves
the columns of numbers out and keeps the ISBN-10s, with the ISBN-10s left out too (``embed.fields`` set to the
title, authors and year), and with every column embedded.
``--train`` also trains and evaluates MOR on each (the quick preset, one thread each).

It prints, for each, how often two items under the same first SID token share a genre, against two items drawn at
random: the higher, the more the first token groups items by what they are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRABREC_SHARED", ROOT.parent / "shared"))


def write_books(folder: Path) -> tuple[Path, Path]:
    """``ratings.csv`` and ``books.csv`` from the shared MovieLens-100K."""
    src = SHARED / "datasets" / "ml-100k"
    items = pd.read_csv(src / "ml-100k.item", sep="\t", dtype=str)
    items.columns = [c.split(":")[0] for c in items.columns]
    rng = np.random.default_rng(0)
    n = len(items)
    books = pd.DataFrame({
        "book_id": items["item_id"], "goodreads_book_id": rng.integers(1, 3 * 10**7, n),
        "isbn": [isbn10(d) for d in rng.integers(0, 10**9, n)],
        "isbn13": rng.integers(10**12, 10**13, n).astype(float), "authors": items["class"],
        "original_publication_year": items["release_year"], "title": items["movie_title"],
        "average_rating": rng.uniform(3, 5, n).round(2), "ratings_count": rng.integers(100, 10**6, n),
    })  # fmt: skip
    ratings = pd.read_csv(src / "ml-100k.inter", sep="\t", dtype=str)
    ratings.columns = ["user_id", "book_id", "rating", "timestamp"]
    folder.mkdir(parents=True, exist_ok=True)
    books.to_csv(folder / "books.csv", index=False)
    ratings.to_csv(folder / "ratings.csv", index=False)
    return folder / "ratings.csv", folder / "books.csv"


def isbn10(digits: int) -> str:
    """The ISBN-10 of nine digits: their check digit after them (``X`` for 10)."""
    body = f"{digits:09d}"
    check = sum((10 - k) * int(d) for k, d in enumerate(body)) * 10 % 11  # makes the weighted sum a multiple of 11
    return body + ("X" if check == 10 else str(check))


def book_genres(books: Path) -> dict[str, set[str]]:
    """Each book's genres (written as its ``authors``)."""
    table = pd.read_csv(books, dtype=str)
    return {i: set(str(g).split()) for i, g in zip(table["book_id"], table["authors"], strict=True)}


def genre_sharing(run: Path, genres: dict[str, set[str]]) -> tuple[float, float]:
    """The share of pairs of items under one first token that share a genre, and of random pairs."""
    first = {i: tokens[0] for i, tokens in json.loads((run / "sid" / "index.json").read_text()).items()}
    groups: dict[str, list[str]] = {}
    for item, token in first.items():
        groups.setdefault(token, []).append(item)
    shares = [
        np.mean([bool(genres[i] & genres[j]) for j in others])
        for i, token in first.items()
        if (others := [j for j in groups[token] if j != i])
    ]
    pairs = np.random.default_rng(0).choice(list(first), (20_000, 2))
    return float(np.mean(shares)), float(np.mean([bool(genres[a] & genres[b]) for a, b in pairs]))


def side_by_side(variants: dict[str, list[str]], runs: Path, train: bool, encoder: str) -> dict[str, Path]:
    """Run ``crabrec run`` once per variant (its arguments), all at once, to tokenize or (``train``) to evaluate MOR
    with one thread each; each variant's run folder."""
    until = ["--until", "evaluate", "--set", "train.threads=1"] if train else ["--until", "tokenize"]
    jobs = {}
    for n, (name, args) in enumerate(variants.items()):
        cmd = [sys.executable, "-m", "crabrec", "-q", "run", *args, *until, "--name", f"variant-{n}",
               "--set", f"runs_dir={runs}", "--set", f"embed.encoder={encoder}"]  # fmt: skip
        jobs[name] = (runs / f"variant-{n}", subprocess.Popen(cmd))
    for _, job in jobs.values():
        if job.wait():
            raise SystemExit(f"{' '.join(job.args)}: exit {job.returncode}")
    return {name: run for name, (run, _) in jobs.items()}


def print_table(first_column: str, runs: dict[str, Path], genres: dict[str, set[str]], train: bool) -> None:
    """One row per run: genre sharing under the first token and, with ``train``, MOR's validation and test."""
    head = f"| {first_column} | pairs under one first token sharing a genre | random pairs |"
    print(head + (" MOR valid NDCG@10 (best epoch) | test HR@10 | test NDCG@10 | DGU@10 |" if train else ""))
    print("|---" * (3 + 4 * train) + "|")
    for name, run in runs.items():
        share, base = genre_sharing(run, genres)
        row = f"| {name} | {share:.3f} | {base:.3f} |"
        if train:
            best = json.loads((run / "stages" / "train.json").read_text())["summary"]
            m = json.loads((run / "models" / "mor" / "metrics.json").read_text())
            row += (f" {best['best_valid_ndcg@10']:.4f} ({best['best_epoch']}) | {m['HR@10']:.4f} | "
                    f"{m['NDCG@10']:.4f} | {m['DGU@10']:.4f} |")  # fmt: skip
        print(row)


def arguments(doc: str, runs_dir: str) -> argparse.Namespace:
    """The command line of a side-by-side benchmark: ``--runs-dir``, ``--encoder``, ``--train``."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--runs-dir", default=runs_dir)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--train", action="store_true", help="also train and evaluate MOR on each (quick preset, "
                        "side by side with one thread each: 15 to 30 minutes on 2 cores)")  # fmt: skip
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__, "/tmp/item-text")
    runs = Path(args.runs_dir)
    ratings, books = write_books(runs / "data")
    every = ["title", "goodreads_book_id", "isbn", "isbn13", "authors", "original_publication_year", "average_rating",
             "ratings_count"]  # fmt: skip
    data = ["--data", str(ratings), "--items", str(books)]
    variants = {
        "columns of numbers left out (the default; the ISBN-10s stay)": data,
        "the ISBN-10s left out too": [*data, "--set", "embed.fields=[title,authors,original_publication_year]"],
        "every column": [*data, "--set", f"embed.fields=[{','.join(every)}]"],
    }
    done = side_by_side(variants, runs, args.train, args.encoder)
    print_table("item text", done, book_genres(books), args.train)


if __name__ == "__main__":
    main()
