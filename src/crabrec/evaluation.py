"""Test evaluation shared by every method: rank the test rows, score them, write ``metrics.json`` and
``rankings.parquet`` under ``models/<method>/``, and load saved generative models for it.

Metrics are defined in docs/METHOD.md ("Metrics"); :func:`metric_definitions` writes the same definitions, with this
run's numbers of groups and popular share, into every ``metrics.json``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from crabrec.config import EvalConfig
from crabrec.data.dataset import Samples
from crabrec.errors import CrabError
from crabrec.io import atomic_path, write_json
from crabrec.metrics import HEADLINE
from crabrec.runfiles import RunFiles, first_rows


def metric_definitions(n_groups: int, popular_share: float) -> dict[str, str]:
    return {
        "HR@K": "mean over test rows of 1[target's SID is among the top-K generated SIDs]",
        "NDCG@K": "mean of 1[pos < K] / log2(pos + 2), pos = 0-based rank of the target's SID",
        "GP@K(G)": "share of all top-K slots whose item is in popularity group G (a SID of m items gives each 1/m)",
        "GH(G)": "share of all history entries of the test rows whose item is in G",
        "MGU@K": "mean over groups of |GP@K(G) - GH(G)|",
        "DGU@K": "max over groups of GU@K(G) - min over groups of GU@K(G)",
        "groups": f"{n_groups} equal-size item groups by training frequency f_i (targets of training rows), "
        "group 0 least popular",
        "popular_share@10": f"share of top-10 slots going to the top {popular_share:.0%} most frequent items",
        "coverage@10": "share of the catalogue's items shown in at least one test row's top 10",
        "tail_HR@10": "HR@10 over the test rows whose target is in group 0 (the least popular items)",
    }


def test_rows(files: RunFiles, cfg: EvalConfig) -> Samples:
    """The evaluated test rows: all of them, or the first ``evaluate.max_samples``."""
    return first_rows(files.load_splits().test, cfg.max_samples)


def write_evaluation(
    files: RunFiles,
    method: str,
    items: np.ndarray,
    scores: np.ndarray,
    test: Samples,
    seconds: float,
    trie,
    cfg: EvalConfig,
    seed: int,
    versus: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Score ``items`` (``[N, K]`` rankings of the test rows) and write ``metrics.json`` + ``rankings.parquet``; every
    method but the base MOR also gets its change against MOR with paired-bootstrap CIs (``vs_mor``). ``versus``: the
    other model the method is based on and what that one ranks (``Method.base`` and its ``sids``: TIGER+PPD's TIGER),
    whose change against it is added too (``vs_base``)."""
    from crabrec.decode.rank import score_rankings

    pop = files.load_popularity()
    ks, fairness_ks = list(cfg.ks), list(cfg.fairness_ks)
    metrics = score_rankings(items, test, pop.group, pop.popular, pop.n_groups, trie, ks, fairness_ks)
    metrics.update(
        inference_seconds=round(seconds, 2),
        users_per_s=round(len(test) / max(seconds, 1e-9), 1),
        test_rows=len(test),
        definitions=metric_definitions(pop.n_groups, float(pop.popular.mean())),
        ks=ks,
    )
    samples = cfg.bootstrap  # read for every method: MOR's evaluation is what the others' intervals resample
    if method != BASE and samples:
        mine = user_parts(files, items, test, trie)  # once, for each comparison
        metrics["vs_mor"] = versus_base(files, mine, test, samples, seed)
        if versus is not None:
            metrics["vs_base"] = {"method": versus[0], **versus_base(files, mine, test, samples, seed, *versus)}
    columns = {"row": np.arange(len(test)), "user": test.user, "target": test.target, "items": list(items)}
    with atomic_path(files.rankings(method)) as tmp:
        pd.DataFrame({**columns, "scores": list(scores)}).to_parquet(tmp)
    write_json(files.metrics(method), metrics)
    return {k: round(metrics[k], 4) for k in HEADLINE if k in metrics}


BASE = "mor"


def user_parts(files: RunFiles, items: np.ndarray, test: Samples, trie):
    """Per-test-row parts of the @10 metrics of ``items`` (``trie``: the SIDs it was ranked over; None: item ids)."""
    from crabrec.decode.rank import sid_members
    from crabrec.metrics.bootstrap import per_user

    pop = files.load_popularity()
    rep_of, members = (np.arange(len(pop.group)), None) if trie is None else sid_members(trie, len(pop.group))
    history = [row[:n] for row, n in zip(test.history, test.length)]
    return per_user(items, rep_of[test.target], history, pop.group, pop.n_groups, members)


def ranked_parts(files: RunFiles, method: str, sids: str, test: Samples):
    """:func:`user_parts` of ``method``'s stored test rankings (``sids``: what it ranks, as ``Method.sids``), which
    must be of the rows ``test``."""
    from crabrec.decode.trie import SidTrie

    ranked = files.load_rankings(method)
    if len(ranked) != len(test) or not np.array_equal(ranked["target"].to_numpy(), test.target):
        raise CrabError(
            f"{files.rankings(method)}: {method} was evaluated on other test rows ({len(ranked)} vs {len(test)}); "
            f"re-run `crabrec evaluate {files.root} --method {method} --force` with the same evaluate settings"
        )
    trie = None if sids == "none" else SidTrie.build(files.load_codebook(sids == "rebalanced"))
    return user_parts(files, np.stack(ranked["items"]), test, trie)


def versus_base(
    files: RunFiles, parts, test: Samples, samples: int, seed: int, against: str = BASE, sids: str = "base"
) -> dict[str, Any]:
    """Change of a ranking (``parts``: its :func:`user_parts` over the rows ``test``) against method ``against``'s
    test rankings (MOR's by default; ``sids``: what those rank, as ``Method.sids``) on the same rows: deltas with
    paired-bootstrap 95% CIs."""
    from crabrec.metrics.bootstrap import paired_bootstrap

    base_parts = ranked_parts(files, against, sids, test)
    out: dict[str, Any] = paired_bootstrap(base_parts, parts, samples, seed)
    out["bootstrap"] = {"samples": samples, "seed": seed, "users": len(test), "level": 0.95, "paired": True}
    return out


def evaluate_ranker(
    files: RunFiles, method: str, ranker, cfg: EvalConfig, seed: int, versus: tuple[str, str] | None = None
) -> dict[str, Any]:
    """Rank the test rows with ``ranker`` (:mod:`crabrec.rankers`) and write ``method``'s metrics and rankings
    (``versus``: as :func:`write_evaluation`'s). Under a launcher the rows are sharded."""
    from crabrec import distributed

    test = test_rows(files, cfg)
    start = time.perf_counter()
    items, scores = rank_sharded(ranker, test, f"evaluate {method}")
    seconds = time.perf_counter() - start
    summary = (
        write_evaluation(files, method, items, scores, test, seconds, ranker.trie, cfg, seed, versus)
        if distributed.is_main()
        else None
    )
    return distributed.broadcast(summary)


def rank_sharded(ranker, rows: Samples, desc: str) -> tuple[np.ndarray, np.ndarray]:
    """``ranker.rank(rows)``; with several processes, each ranks every N-th block of ``ranker.block`` rows (the
    batches a single process would decode, so every row's result is the same) and the blocks are gathered in order."""
    from crabrec import distributed
    from crabrec.progress import progress

    world, me = distributed.size(), distributed.rank()
    if world == 1:
        return ranker.rank(rows, desc=desc)
    starts = list(range(0, len(rows), ranker.block))[me::world]
    mine = []
    for s in progress(starts, f"{desc} (process {me} of {world})", show=me == 0):
        block = rows.take(np.arange(s, min(s + ranker.block, len(rows))))
        mine.append((s, *ranker.rank(block, desc=desc, progress=False)))
    parts = sorted((p for shard in distributed.gather(mine) for p in shard), key=lambda p: p[0])
    if not parts:
        return ranker.rank(rows, desc=desc, progress=False)  # no rows: the empty ranking of the right shape
    return np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
