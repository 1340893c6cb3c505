"""Item-embedding throughput (items/s) of the bundled all-MiniLM-L6-v2 on real Office item text.

python benchmarks/bench_embed.py [--n 400]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    args = ap.parse_args()
    from crabrec.config import DataConfig, EmbedConfig
    from crabrec.data import load_dataset
    from crabrec.embed import encode, item_texts

    ds = load_dataset(DataConfig())
    records = ds.item_text[: args.n]
    encode(["warm up"], EmbedConfig(), progress=False)
    print("| text | items | mean chars | seconds | items/s |")
    print("|---|---|---|---|---|")
    for label, cfg in [
        ("title + description (default)", EmbedConfig()),
        ("title only", EmbedConfig(fields=["title"])),
        ("hashing-bow (no model)", EmbedConfig(encoder="hashing-bow")),
    ]:
        texts = item_texts(records, cfg)
        t = time.perf_counter()
        encode(texts, cfg, progress=False)
        sec = time.perf_counter() - t
        chars = sum(map(len, texts)) / len(texts)
        print(f"| {label} | {len(texts)} | {chars:.0f} | {sec:.1f} | {len(texts) / sec:.1f} |")


if __name__ == "__main__":
    main()
