"""crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
