"""Export a run's data in MiniOneRec's layout, so that MiniOneRec itself (or ``data.format=minionerec``) can read it.

Written under ``OUT/``: ``train|valid|test/<Name>.csv`` with MiniOneRec's columns (``user_id, history_item_title,
item_title, history_item_id, item_id, history_item_sid, item_sid``; lists as Python-literal strings, SIDs as
``<a_x><b_y>...``), ``index/<Name>.index.json`` (item -> SID tokens), ``index/<Name>.item.json`` (item -> text, with
the dataset's own id as ``source_id``) and ``info/<Name>.txt`` (``sid<TAB>title<TAB>item_id``). Items are numbered
0..N-1 in the run's catalogue order and users by the run's user index, as MiniOneRec's converter numbers them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from crabrec.config_paths import not_the_runs_data
from crabrec.errors import CrabError
from crabrec.io import publish_mode, replaceable_folder, writable_parent
from crabrec.runfiles import RunFiles, run_folder

COLUMNS = ("user_id", "history_item_title", "item_title", "history_item_id", "item_id", "history_item_sid", "item_sid")


PARTS = ("train", "valid", "test", "index", "info")


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an export of this command and nothing else (what ``--force`` may replace)."""
    entries = list(folder.iterdir())
    return all(e.name in PARTS and e.is_dir() and not e.is_symlink() for e in entries) and any(
        e.name == "index" for e in entries
    )


def export_minionerec(run_dir: str | Path, out: str | Path, force: bool = False) -> dict[str, Any]:
    """Write the run's splits, SIDs and item text to ``out`` in MiniOneRec's layout; returns the row counts."""
    import pandas as pd

    files, out = RunFiles(run_folder(run_dir)), Path(out)
    if out.exists() and not out.is_dir():
        raise CrabError(f"{out}: exists and is not a folder; choose another folder")
    if out.exists() and any(out.iterdir()) and not force:
        raise CrabError(f"{out}: exists and is not empty; choose another folder or pass --force")
    not_the_runs_data(out, run_dir, "export folder")
    replaceable_folder(out, is_export, "an earlier MiniOneRec export", [Path(run_dir)])
    items = files.load_items()
    splits, codebook = files.load_splits(), files.load_codebook()
    name = str(items.get("name") or "data")
    n = len(items["item_ids"])
    if codebook.n_items != n:
        raise CrabError(
            f"{files.codebook()}: {codebook.n_items} items but the run's catalogue has {n}; re-run tokenize"
        )
    text = items.get("text") or [{}] * n
    titles = [str(t.get("title", "")) for t in text]
    sids = [codebook.sid_string(i) for i in range(n)]
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=writable_parent(out)))
    try:
        counts = {}
        for part in PARTS[:3]:
            rows = getattr(splits, part)
            hist = rows.rows()
            frame = pd.DataFrame(
                {
                    "user_id": [str(u) for u in rows.user.tolist()],
                    "history_item_title": [str([titles[i] for i in h]) for h in hist],
                    "item_title": [titles[t] for t in rows.target.tolist()],
                    "history_item_id": [str(h) for h in hist],
                    "item_id": rows.target.tolist(),
                    "history_item_sid": [str([sids[i] for i in h]) for h in hist],
                    "item_sid": [sids[t] for t in rows.target.tolist()],
                },
                columns=list(COLUMNS),
            )
            (tmp / part).mkdir()
            frame.to_csv(tmp / part / f"{name}.csv", index=False)
            counts[part] = len(frame)
        (tmp / "index").mkdir()
        index = {str(i): tokens for i, tokens in enumerate(codebook.to_index().values())}
        (tmp / "index" / f"{name}.index.json").write_text(json.dumps(index))
        meta = {str(i): {**text[i], "source_id": items["item_ids"][i]} for i in range(n)}
        (tmp / "index" / f"{name}.item.json").write_text(json.dumps(meta))
        (tmp / "info").mkdir()
        lines = "".join(f"{sids[i]}\t{' '.join(titles[i].split())}\t{i}\n" for i in range(n))
        (tmp / "info" / f"{name}.txt").write_text(lines)
        publish_mode(tmp, out)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return {"folder": str(out), "items": n, **counts}
