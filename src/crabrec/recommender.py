"""Use a trained run: ``crabrec.load(run_dir, method)`` gives a :class:`Recommender` that ranks histories given in the
dataset's own item ids. ``crabrec recommend`` and ``crabrec serve`` are built on it.

It ranks with the method's registered ranker (:mod:`crabrec.rankers`), the one its evaluation used: the same beam
search (and RR's re-ranking). By default the items of a history are not recommended back (``exclude_seen=True``,
applied inside the search, so a list keeps its ``k`` items); with ``exclude_seen=False``, ``recommend_batch`` over
the test histories reproduces ``rankings.parquet`` (the paper's protocol, which ranks every item).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from crabrec.data.dataset import Samples
from crabrec.errors import CrabError, clip
from crabrec.histories import is_user_index

ItemId = str | int  # item ids are strings; an int is read as its decimal string (as JSON numbers would be)


@dataclass(frozen=True)
class Recommendation:
    """One recommended item: its 1-based rank, dataset id, title, model score (log-probability of its SID for the
    generative methods, the logit for SASRec, the re-ranked score for RR) and training-popularity group
    (0 = least popular of ``n_groups``; ``popular``: among the most frequent items the metrics single out)."""

    rank: int
    item: str
    title: str
    score: float
    group: int
    popular: bool

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FIELDS}


FIELDS = tuple(f.name for f in fields(Recommendation))


class Recommender:
    """A trained method of a run, ready to rank. Build it with :func:`load`."""

    def __init__(self, run_dir: Path, method: str, ranker, items: dict[str, Any], popularity, max_history: int):
        self.run_dir, self.method, self.ranker = run_dir, method, ranker
        self.item_ids: list[str] = [str(i) for i in items["item_ids"]]
        text = items.get("text") if isinstance(items.get("text"), list) else []
        self.titles = [str(t.get("title", "")) if isinstance(t, dict) else "" for t in text]
        self.titles += [""] * (len(self.item_ids) - len(self.titles))
        self.titles = [_utf8(html.unescape(t)) for t in self.titles]  # "AT&amp;T" in the source is shown "AT&T"
        self.index = {item: i for i, item in enumerate(self.item_ids)}
        self.group, self.popular, self.n_groups = popularity.group, popularity.popular, popularity.n_groups
        groups, popular = self.group.tolist(), self.popular.tolist()
        self.cards = [  # what a recommendation says of each item, built once (a response holds k of them)
            (_utf8(item), title, int(g), bool(p))
            for item, title, g, p in zip(self.item_ids, self.titles, groups, popular)
        ]
        self.max_history = max_history

    @property
    def max_k(self) -> int:
        """The longest list this recommender ranks: the beam width of a generative method."""
        return int(self.ranker.width)

    def recommend(
        self,
        history: Sequence[ItemId],
        k: int = 10,
        *,
        user: int | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
    ) -> list[Recommendation]:
        """The top-``k`` items after ``history`` (oldest first; only the last ``max_history`` items are read).

        ``user``: the run's user index (the ``user`` column of ``rankings.parquet``); only TIGER reads it, as a
        hashed user token, and without it reads the history as user 0's. ``drop_unknown``: ignore ids that are not
        in the run's catalogue instead of raising. ``exclude_seen``: never recommend an item of ``history`` (all of
        it, not only the last ``max_history`` items)."""
        users = None if user is None else [user]
        return self.recommend_batch([history], k, users=users, drop_unknown=drop_unknown, exclude_seen=exclude_seen)[0]

    def recommend_batch(
        self,
        histories: Sequence[Sequence[ItemId]],
        k: int = 10,
        *,
        users: Sequence[int] | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
        progress: bool = False,
    ) -> list[list[Recommendation]]:
        """:meth:`recommend` for many histories, ranked in batches of ``evaluate.batch_size`` (one vectorized beam
        search per batch, as ``evaluate`` does)."""
        self.check_k(k)
        rows = self.samples(histories, users, drop_unknown, exclude_seen)
        items, scores = self.ranker.rank(rows, desc=f"recommend {self.method}", progress=progress)
        return [self.top(items[r], scores[r], k) for r in range(len(rows))]

    def check_k(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= self.max_k:
            raise CrabError(
                f"k={k!r}: expected an integer from 1 to {self.max_k} (the {self.method} list length: its beam "
                "width, at most the catalogue's distinct SIDs; --beam or beam= sets it)"
            )

    def samples(
        self,
        histories: Sequence[Sequence[ItemId]],
        users: Sequence[int] | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
    ) -> Samples:
        """Histories of item ids -> the rows the rankers read (errors name the history and its unknown ids); with
        ``exclude_seen`` each row carries its whole history as the items it must not get back."""
        histories = _listed(histories)
        if isinstance(histories, str | bytes) or not isinstance(histories, Sequence):
            raise CrabError(f"histories: expected a list of item-id lists, got {type(histories).__name__}")
        if users is not None and len(users) != len(histories):
            raise CrabError(f"users: expected one per history ({len(histories)}), got {len(users)}")
        rows = [self.indices(h, r if len(histories) > 1 else None, drop_unknown) for r, h in enumerate(histories)]
        user = [0] * len(rows) if users is None else [self.user_index(u, r) for r, u in enumerate(users)]
        seen = rows if exclude_seen else None
        return Samples.from_rows(user, rows, [0] * len(rows), self.max_history, seen=seen)

    def indices(self, history: Sequence[ItemId], row: int | None, drop_unknown: bool) -> list[int]:
        where = "history" if row is None else f"history {row}"
        history = _listed(history)
        if isinstance(history, str | bytes) or not isinstance(history, Sequence):
            raise CrabError(f"{where}: expected a list of item ids, got {type(history).__name__}")
        ids = []
        for item in history:
            if isinstance(item, bool) or not isinstance(item, str | int | np.integer):
                raise CrabError(f"{where}: item ids are strings, got {clip(repr(item), 40)}")
            ids.append(str(item))
        unknown = [i for i in ids if i not in self.index]
        if unknown and not drop_unknown:
            shown = ", ".join(repr(clip(u, 40)) for u in unknown[:5]) + (" …" if len(unknown) > 5 else "")
            raise CrabError(
                f"{where}: {len(unknown)} item id(s) not in this run's catalogue of {len(self.item_ids)} items: "
                f"{shown} (--drop-unknown or drop_unknown=True drops them)"
            )
        known = [self.index[i] for i in ids if i in self.index]
        if not known:
            raise CrabError(
                f"{where}: empty" + (" after dropping unknown items" if ids else "") + "; expected item ids"
            )
        return known

    @staticmethod
    def user_index(user: Any, row: int) -> int:
        if not is_user_index(user):
            raise CrabError(f"users[{row}]: expected a user index from 0 to 2^63 - 1, got {clip(repr(user), 40)}")
        return int(user)

    def top(self, items: np.ndarray, scores: np.ndarray, k: int) -> list[Recommendation]:
        """The first ``k`` filled slots of one ranked row as :class:`Recommendation` s."""
        return [Recommendation(**entry) for entry in self.top_dicts(items, scores, k)]

    def top_dicts(self, items: np.ndarray, scores: np.ndarray, k: int) -> list[dict[str, Any]]:
        """:meth:`top` as plain dicts (``Recommendation.as_dict``), the JSON the service answers with."""
        out = []
        for item, score in zip(items[:k].tolist(), scores[:k].tolist()):
            if item < 0:
                break
            name, title, group, popular = self.cards[item]
            out.append(
                {"rank": len(out) + 1, "item": name, "title": title, "score": round(score, 6), "group": group,
                 "popular": popular}
            )  # fmt: skip
        return out


def _listed(value: Any) -> Any:
    """A numpy array of ids (or of id lists) as the list it holds; anything else as it is."""
    return value.tolist() if isinstance(value, np.ndarray) and value.ndim >= 1 else value


def _utf8(text: str) -> str:
    """``text`` with any lone surrogate (a ``\\ud800`` escape in the source JSON) replaced, so it encodes as UTF-8."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def load(run_dir: str | Path, method: str = "mor", *, beam: int | None = None) -> Recommender:
    """The trained ``method`` of the run at ``run_dir`` (a folder ``crabrec run`` wrote).

    ``beam``: the beam width (the longest list) of a generative method; default the run's ``evaluate.beam``."""
    from crabrec.config import load_config
    from crabrec.methods import get
    from crabrec.runfiles import RunFiles
    from crabrec.stages import registry

    if not isinstance(run_dir, str | Path):
        raise CrabError(f"run_dir: expected a path to a run folder, got {type(run_dir).__name__}")
    root = Path(run_dir)
    if not (root / "config.yaml").is_file():
        raise CrabError(f"{run_dir}: not a run directory (no config.yaml); run `crabrec run` first")
    chosen = get(method)
    if chosen.ranker is None:
        raise CrabError(f"--method {method!r}: this method cannot rank histories")
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int) or beam < 1):
        raise CrabError(f"beam={beam!r}: expected an integer ≥ 1")
    location = {"name": root.resolve().name, "runs_dir": str(root.resolve().parent)}
    cfg = load_config(str(root / "config.yaml"), location)
    files = RunFiles(root)
    for name, stage in registry().items():  # what a ranker reads is what its stage wrote
        if stage.checked_outputs:
            files.check_written(name)
    ranker = chosen.ranker(files, cfg, beam)
    return Recommender(root, method, ranker, files.load_items(), files.load_popularity(), cfg.data.max_history)
