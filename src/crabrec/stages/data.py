"""Stage ``data``: load, filter, split and count popularity; artifacts under ``<run>/data/``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from crabrec.config_paths import as_written
from crabrec.errors import CrabError
from crabrec.io import write_json, write_npz
from crabrec.pipeline import RunContext, Stage

log = logging.getLogger("crabrec")


def run_data(ctx: RunContext) -> dict[str, Any]:
    from crabrec.data import compute_popularity, load_dataset, make_splits
    from crabrec.data.repeats import describe_repeats
    from crabrec.data.splits import split_reason
    from crabrec.data.stats import dataset_stats
    from crabrec.data.users import UserHistories

    cfg, files = ctx.cfg.data, ctx.files
    ds = load_dataset(cfg)
    splits = make_splits(ds, cfg.split, cfg.max_history)
    log.info("%s: split %s (%s)", ds.name, *split_reason(ds, cfg.split))
    for part in ("train", "valid", "test"):
        if len(getattr(splits, part)) == 0:
            hint = "; with leave_one_out a user needs 4 interactions for a training row" if part == "train" else ""
            raise CrabError(
                f"{cfg.path or 'the dataset'}: the {splits.kind} split leaves no {part} rows "
                f"({ds.n_users} users, {len(ds.item_ids)} items){hint if splits.kind == 'leave_one_out' else ''}"
            )
    pop = compute_popularity(splits.train, ds.n_items, cfg.n_groups, cfg.popular_share)
    stats = dataset_stats(ds, splits, pop, cfg.repeats)
    for label, text in describe_repeats(stats["repeats"], stats["interactions"]):
        log.info("%s: %s: %s", ds.name, label, text)
    stats["source"] = as_written(ctx.config, "data.path", stats["source"])
    splits.save(files.splits)
    arrays = {"freq": pop.freq, "group": pop.group, "popular": pop.popular, "n_groups": np.int64(pop.n_groups)}
    write_npz(files.popularity, **arrays)
    write_json(files.items, {"name": ds.name, "item_ids": ds.item_ids, "text": ds.item_text, "has_text": ds.has_text})
    write_json(files.data_stats, stats)
    UserHistories.from_dataset(ds).save(files.users)
    return {
        "users": stats["users"],
        "items": stats["items"],
        "interactions": stats["interactions"],
        "split": splits.kind,
        "train": len(splits.train),
        "valid": len(splits.valid),
        "test": len(splits.test),
    }


def data_revision(ctx: RunContext) -> int:
    """Nonzero only for a table or RecBole file whose results a change of its reading changed (:func:`table_revision`
    says which changes); 0 for every other dataset, whose results never changed."""
    from crabrec.data.table import table_revision

    return table_revision(ctx.config.data)


DATA_STAGE = Stage(
    name="data",
    fn=run_data,
    reads=("data",),
    artifacts=("data/splits.npz", "data/popularity.npz", "data/items.json", "data/stats.json"),
    added=("data/users.npz",),
    describe="load, k-core, split into samples, item popularity and groups",
    uses_torch=False,
    revised=data_revision,
)
