"""Dataset statistics for ``crabrec data stats``."""

from __future__ import annotations

from typing import Any

import numpy as np

from crabrec.data.dataset import Dataset, Splits
from crabrec.data.popularity import Popularity
from crabrec.data.repeats import describe_repeats, repeat_stats


def dataset_stats(ds: Dataset, splits: Splits, pop: Popularity, repeats: str) -> dict[str, Any]:
    """The numbers ``crabrec data stats`` prints and ``data/stats.json`` keeps; ``repeats``: the data.repeats used."""
    lengths = np.array([len(s) for s in ds.sequences]) if ds.sequences else np.zeros(1, int)
    return {
        "dataset": ds.name,
        "source": ds.source,
        "users": ds.n_users,
        "items": ds.n_items,
        "item_text": ds.has_text,
        "interactions": ds.n_interactions,
        "sequence_length": {
            "min": int(lengths.min()),
            "p50": float(np.median(lengths)),
            "mean": round(float(lengths.mean()), 2),
            "p90": float(np.percentile(lengths, 90)),
            "max": int(lengths.max()),
        },
        "split": splits.kind,
        "samples": {"train": len(splits.train), "valid": len(splits.valid), "test": len(splits.test)},
        "items_with_train_freq_0": int((pop.freq == 0).sum()),
        "top20_interaction_share": round(pop.top_share(0.2), 4),
        "group_sizes": np.bincount(pop.group, minlength=pop.n_groups).tolist(),
        "repeats": repeat_stats(ds, splits.test, repeats),
        "notes": ds.notes,
    }


def format_stats(stats: dict[str, Any]) -> str:
    sl = stats["sequence_length"]
    s = stats["samples"]
    lines = [
        f"dataset            {stats['dataset']}  ({stats['source']})",
        f"users              {stats['users']:,}",
        f"items              {stats['items']:,}",
        f"interactions       {stats['interactions']:,}",
        f"sequence length    min {sl['min']}  median {sl['p50']:g}  mean {sl['mean']}  "
        f"p90 {sl['p90']:g}  max {sl['max']}",
        f"split              {stats['split']}",
        f"samples            train {s['train']:,}  valid {s['valid']:,}  test {s['test']:,}",
        f"top-20% item share {stats['top20_interaction_share']:.1%} of training interactions",
        f"popularity groups  {stats['group_sizes']} items (group 0 least popular)",
        f"items never a train target  {stats['items_with_train_freq_0']:,}",
    ]
    lines += [f"{label:<19}{text}" for label, text in describe_repeats(stats.get("repeats", {}), stats["interactions"])]
    lines += [f"note               {n}" for n in stats["notes"]]
    return "\n".join(lines)
