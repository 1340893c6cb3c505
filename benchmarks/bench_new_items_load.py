"""Loading a trained run with new items: the first load of a table encodes their text; a later load of the same
table reads the encoding the run kept (the reference: every load encodes, as the cache emptied before it).

    python benchmarks/bench_new_items_load.py [--runs runs] [--items 1000] [--repeat 3]

A quick-preset run of the embedded Office data (trained into ``--runs``/office-quick unless it is there). The table
holds ``--items`` new items: the text of a seeded draw of the catalogue's items under new ids, each title marked as
a new edition so that no text is one the run encoded. Printed: the seconds of ``crabrec.load(RUN, "mor",
new_items=TABLE)`` with the cache emptied before each load, and with it kept (medians of ``--repeat``), and whether
the new items' semantic IDs are the same both ways.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

STAGES = ["evaluate"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="runs", help="where the quick run is kept")
    ap.add_argument("--items", type=int, default=1000, help="new items in the table")
    ap.add_argument("--repeat", type=int, default=3, help="loads timed each way (the median is printed)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the items whose text is drawn")
    args = ap.parse_args()
    import crabrec
    from crabrec.data.loaders import embedded_path
    from crabrec.runfiles import RunFiles

    run = crabrec.run(preset="quick", until=STAGES, overrides={"runs_dir": str(Path(args.runs))})
    text = json.loads((embedded_path() / "Office.item.json").read_text())
    rng = np.random.default_rng(args.seed)
    drawn = rng.choice(sorted(text, key=lambda i: (len(i), i)), args.items, replace=args.items > len(text))
    table = Path(args.runs) / "bench-new-items-load.jsonl"
    with table.open("w", encoding="utf-8") as out:
        for n, item in enumerate(drawn):
            record = {**text[item], "title": f"{text[item].get('title', '')} (new edition {n})"}
            out.write(json.dumps({"item_id": f"new-{n}", **record}) + "\n")
    cache = RunFiles(run).new_items_cache

    def loads(keep: bool) -> tuple[float, np.ndarray]:
        seconds = []
        for _ in range(args.repeat):
            if not keep:
                shutil.rmtree(cache, ignore_errors=True)
            start = time.perf_counter()
            rec = crabrec.load(run, "mor", new_items=table)
            seconds.append(time.perf_counter() - start)
        return float(np.median(seconds)), rec.ranker.trie.sids[rec.ranker.trie.item_sid]  # every item's SID

    cold, cold_sids = loads(keep=False)
    warm, warm_sids = loads(keep=True)
    print(f"{run}: {args.items} new items, MOR, medians of {args.repeat} loads\n")
    print("| load | seconds |")
    print("|---|---|")
    print(f"| encoding every time (reference) | {cold:.2f} |")
    print(f"| the kept encoding | {warm:.2f} |")
    same = "yes" if np.array_equal(cold_sids, warm_sids) else "NO"
    print(f"\n{cold / warm:.0f}x faster; the same semantic IDs: {same}")


if __name__ == "__main__":
    main()
