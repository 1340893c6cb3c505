"""crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from crabrec.recommender import Recommender

__version__ = "0.1.0"


def load(run_dir: str | os.PathLike, method: str = "mor", *, beam: int | None = None) -> Recommender:
    """The trained ``method`` (``crabrec methods`` lists them) of the run folder ``run_dir`` that ``crabrec run``
    wrote, as a :class:`~crabrec.recommender.Recommender` ready to rank histories of the dataset's own item ids.

    ``beam``: the beam width, which is the longest list a generative method returns (default: the run's
    ``evaluate.beam``). Raises :class:`crabrec.errors.CrabError` with a one-line reason when the folder is not a
    finished run or the method was not trained in it.

    Example::

        rec = crabrec.load("runs/office-quick", "crab")
        for r in rec.recommend(["0", "1", "5"], k=5):
            print(r.rank, r.item, r.title, r.group)
    """
    from crabrec.recommender import load as load_run

    return load_run(run_dir, method, beam=beam)


def results(run_dir: str | os.PathLike) -> pd.DataFrame:
    """Table 1 of the run folder ``run_dir`` as a pandas DataFrame, read from the stored metrics (nothing is
    computed): one row per evaluated method, in Table 1's order, indexed by the method's name (``mor``, ``crab``
    ...), with its ``label``, the frontier ``setting`` it is shown at (empty: its configured one), every metric of
    its ``metrics.json`` (``HR@K`` and ``NDCG@K`` for K in 1, 3, 5, 10, 20; ``MGU@K`` and ``DGU@K`` for K in 1, 5,
    10, 20; ``coverage@10``, ``tail_HR@10``, ``popular_share@10``; ``inference_seconds``, ``users_per_s``,
    ``test_rows``) and ``train_s``, the method's own cost in seconds as Table 1 counts it.

    Example::

        table = crabrec.results("runs/office-quick")
        print(table[["HR@10", "NDCG@10", "DGU@10", "MGU@10"]].round(4))
    """
    from crabrec.report import results_frame

    return results_frame(run_dir)
