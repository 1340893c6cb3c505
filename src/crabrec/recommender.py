"""Use a trained run: ``crabrec.load(run_dir, method)`` gives a :class:`Recommender` that ranks histories given in the
dataset's own item ids. ``crabrec recommend`` and ``crabrec serve`` are built on it.

A user the data knows can be named by their id instead of a history (``user_id=``): the history is then everything
the run's data holds for them, and TIGER reads their own user token.

It ranks with the method's registered ranker (:mod:`crabrec.rankers`), the one its evaluation used: the same beam
search (and RR's re-ranking). By default the items of a history are not recommended back (``exclude_seen=True``,
applied inside the search, so a list keeps its ``k`` items); with ``exclude_seen=False``, ``recommend_batch`` over
the test histories reproduces ``rankings.parquet`` (the paper's protocol, which ranks every item). Items that must
not be recommended (discontinued, out of stock) are excluded the same way: for every request (``unavailable=`` when
loading, :meth:`Recommender.set_unavailable`) or for one (``exclude=``); see :mod:`crabrec.unavailable`.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crabrec.data.dataset import Samples
from crabrec.data.ids import Spellings
from crabrec.errors import CrabError, clip
from crabrec.histories import Answers, is_user_index

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from crabrec.new_items import NewItems

log = logging.getLogger("crabrec")
NEW_SHARE = 0.1  # of every top-k, the most that new items take after the generated SIDs they share tokens with
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
        self._users = None  # the run's UserHistories, read when a user id is first asked for
        self.item_ids: list[str] = [str(i) for i in items["item_ids"]]
        text = items.get("text") if isinstance(items.get("text"), list) else []
        self.titles = [str(t.get("title", "")) if isinstance(t, dict) else "" for t in text]
        self.titles += [""] * (len(self.item_ids) - len(self.titles))
        self.titles = [_utf8(html.unescape(t)) for t in self.titles]  # "AT&amp;T" in the source is shown "AT&T"
        self.index = {item: i for i, item in enumerate(self.item_ids)}
        self.spellings = Spellings(self.item_ids)  # what an unknown id typed another way stands for
        self.group, self.popular, self.n_groups = popularity.group, popularity.popular, popularity.n_groups
        groups, popular = self.group.tolist(), self.popular.tolist()
        self.cards = [  # what a recommendation says of each item, built once (a response holds k of them)
            (_utf8(item), title, int(g), bool(p))
            for item, title, g, p in zip(self.item_ids, self.titles, groups, popular)
        ]
        self.names = np.array([card[0] for card in self.cards], dtype=object)  # the ids a file of answers writes
        self.max_history = max_history
        self.unavailable = np.zeros(0, dtype=np.int64)  # catalogue indices never recommended (set_unavailable)
        self.in_rows = self.unavailable  # those each row must exclude: none where the ranker leaves them out itself

    def __repr__(self) -> str:
        return (
            f"Recommender(run={str(self.run_dir)!r}, method={self.method!r}, items={len(self.item_ids):,}, "
            f"max_k={self.max_k})"
        )

    def set_unavailable(self, ids: Sequence[ItemId], name: str = "unavailable", report: bool = True) -> int:
        """Never recommend the items ``ids`` from now on (replacing any earlier set; ``[]`` clears it); ids the
        catalogue does not hold are left aside, with a log line unless ``report`` is False (``name``: how it names
        the list). Returns how many catalogue items are unavailable."""
        ids = item_ids(ids, name)
        found = np.unique(self.known(ids, name))
        outside = [i for i in dict.fromkeys(ids) if i not in self.index]
        if outside and report:
            shown = ", ".join(self._unknown(u) for u in outside[:5]) + (" …" if len(outside) > 5 else "")
            if len(found):
                log.info("%s: %d of its %d item ids are not in the run's catalogue, which never recommends them: %s",
                         name, len(outside), len(set(ids)), shown)  # fmt: skip
            else:  # a file of other ids altogether, or another column of the table
                log.warning("%s: none of its %d item ids is in the run's catalogue (%s), so no item is left out",
                            name, len(outside), shown)  # fmt: skip
        leaves_out = getattr(self.ranker, "set_unavailable", None)  # crabrec's rankers: inside the search
        self.unavailable = found
        self.in_rows = found[:0] if leaves_out is not None and leaves_out(found) else found
        return len(found)

    def excluded(self, exclude: Sequence[ItemId] | None) -> np.ndarray:
        """The catalogue indices each row must exclude: ``exclude`` (item ids; ids outside the catalogue are left
        aside), and the unavailable items where the ranker does not leave them out itself."""
        return self.in_rows if exclude is None else np.union1d(self.known(exclude, "exclude"), self.in_rows)

    def known(self, ids: Sequence[ItemId] | None, where: str) -> np.ndarray:
        """The catalogue indices of the item ids ``ids`` the catalogue holds (None: none); ``where`` names them in
        errors."""
        if ids is None:
            return np.zeros(0, dtype=np.int64)
        return np.fromiter((self.index[i] for i in item_ids(ids, where) if i in self.index), dtype=np.int64)

    @property
    def max_k(self) -> int:
        """The longest list this recommender ranks: the beam width of a generative method."""
        return int(self.ranker.width)

    def recommend(
        self,
        history: Sequence[ItemId] | None = None,
        k: int = 10,
        *,
        user: int | None = None,
        user_id: str | int | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
        exclude: Sequence[ItemId] | None = None,
    ) -> list[Recommendation]:
        """The top-``k`` items after ``history`` (oldest first; only the last ``max_history`` items are read).

        ``user_id``: a user of the run's data, by the id the data gave them; without ``history``, their history is
        every item the data holds for them. ``user``: the run's user index instead (the ``user`` column of
        ``rankings.parquet``). Only TIGER reads the user, as a hashed user token, and without one reads the history
        as user 0's. ``drop_unknown``: ignore ids that are not in the run's catalogue instead of raising.
        ``exclude_seen``: never recommend an item of the history (all of it, not only the last ``max_history``
        items). ``exclude``: item ids not to recommend either (out of stock now, say), besides the unavailable
        items."""
        if history is None and user_id is None:
            raise CrabError("history: missing; give item ids (or a user_id)")
        users = None if user is None else [user]
        user_ids = None if user_id is None else [user_id]
        return self.recommend_batch(
            None if history is None else [history], k, users=users, user_ids=user_ids, drop_unknown=drop_unknown,
            exclude_seen=exclude_seen, exclude=exclude,
        )[0]  # fmt: skip

    def recommend_batch(
        self,
        histories: Sequence[Sequence[ItemId] | None] | None = None,
        k: int = 10,
        *,
        users: Sequence[int] | None = None,
        user_ids: Sequence[str | int] | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
        exclude: Sequence[ItemId] | None = None,
        excludes: Sequence[Sequence[ItemId] | None] | None = None,
        progress: bool = False,
        rows: Sequence[str] | None = None,
    ) -> list[list[Recommendation]]:
        """:meth:`recommend` for many histories (or users: ``user_ids``, a None history for a user's known one),
        ranked in batches of ``evaluate.batch_size`` (one vectorized beam search per batch, as ``evaluate`` does);
        ``exclude``: item ids no list may hold; ``excludes``: one list (or None) per history, of item ids its own
        list may not hold; ``rows``: how errors name each history (:meth:`samples`)."""
        self.check_k(k)
        rows = self.samples(histories, users, drop_unknown, exclude_seen, user_ids=user_ids, rows=rows, exclude=exclude,
                            excludes=excludes)  # fmt: skip
        return self.ranked(rows, k, progress)

    def recommend_frame(
        self,
        histories: Sequence[Sequence[ItemId] | None] | None = None,
        k: int = 10,
        *,
        users: Sequence[int] | None = None,
        user_ids: Sequence[str | int] | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
        exclude: Sequence[ItemId] | None = None,
        excludes: Sequence[Sequence[ItemId] | None] | None = None,
        progress: bool = False,
    ) -> pd.DataFrame:
        """:meth:`recommend_batch` as one pandas DataFrame, one row per recommended item: ``row`` (the history's
        place, from 0), ``rank`` (from 1), ``item``, ``score`` and ``group``, as :class:`Recommendation` gives them.
        Built from arrays, without an object per item: a million histories' top 10 is a table of ten million rows,
        where their lists of objects would take gigabytes."""
        import pandas as pd

        self.check_k(k)
        rows = self.samples(histories, users, drop_unknown, exclude_seen, user_ids=user_ids, exclude=exclude,
                            excludes=excludes)  # fmt: skip
        found = self.answers(rows, k, progress)
        items, scores, groups = found.flat()
        starts = np.cumsum(found.count) - found.count
        row = np.repeat(np.arange(len(found)), found.count)
        rank = np.arange(len(items)) - np.repeat(starts, found.count) + 1
        return pd.DataFrame({"row": row, "rank": rank, "item": items, "score": scores, "group": groups})

    def ranked(self, rows: Samples, k: int, progress: bool = False) -> list[list[Recommendation]]:
        """The first ``k`` recommendations of each of ``rows`` (:meth:`samples`), ranked in batches of
        ``evaluate.batch_size``."""
        items, scores = self.ranker.rank(rows, desc=f"recommend {self.method}", progress=progress)
        return [self.top(items[r], scores[r], k) for r in range(len(rows))]

    def answers(self, rows: Samples, k: int, progress: bool = False) -> Answers:
        """:meth:`ranked` as arrays (what a file of answers writes): the same lists, without an object per item."""
        items, scores = self.ranker.rank(rows, desc=f"recommend {self.method}", progress=progress)
        items, scores = items[:, :k], scores[:, :k]
        count = np.cumprod(items >= 0, axis=1).sum(axis=1)  # a list ends at its first empty slot, as top() reads it
        index = np.maximum(items, 0)
        return Answers(self.names[index], scores, np.asarray(self.group)[index], count)

    def check_k(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= self.max_k:
            raise CrabError(
                f"k={k!r}: expected an integer from 1 to {self.max_k} (the {self.method} list length: its beam "
                "width, at most the catalogue's distinct SIDs; --beam or beam= sets it)"
            )

    def samples(
        self,
        histories: Sequence[Sequence[ItemId] | None] | None,
        users: Sequence[int] | None = None,
        drop_unknown: bool = False,
        exclude_seen: bool = True,
        *,
        user_ids: Sequence[str | int] | None = None,
        rows: Sequence[str] | None = None,
        exclude: Sequence[ItemId] | None = None,
        excludes: Sequence[Sequence[ItemId] | None] | None = None,
    ) -> Samples:
        """Histories of item ids -> the rows the rankers read (errors name the history and its unknown ids); with
        ``exclude_seen`` each row carries its whole history as the items it must not get back, and every row
        carries ``exclude`` (item ids; and the unavailable items, where the ranker does not leave them out
        itself: :meth:`excluded`), each row its own of ``excludes`` (one list or None per history). With ``user_ids``,
        a history that is None (or ``histories`` None) is the user's known one. ``rows``: how errors name each
        history's row (a file's ``row 2``); by default ``history 0``, ``history 1`` ..."""
        user_ids = _listed(user_ids)
        if user_ids is not None and (isinstance(user_ids, str | bytes) or not isinstance(user_ids, Sequence)):
            raise CrabError(f"user_ids: expected a list of user ids, got {type(user_ids).__name__}")
        if users is not None and user_ids is not None:
            raise CrabError("give users (the run's user indices) or user_ids (the data's user ids), not both")
        histories = _listed(histories) if histories is not None or user_ids is None else [None] * len(user_ids)
        if isinstance(histories, str | bytes) or not isinstance(histories, Sequence):
            raise CrabError(f"histories: expected a list of item-id lists, got {type(histories).__name__}")
        excludes = _listed(excludes)
        if excludes is not None and (isinstance(excludes, str | bytes) or not isinstance(excludes, Sequence)):
            raise CrabError(f"excludes: expected one list of item ids per history, got {type(excludes).__name__}")
        for name, given in (("users", users), ("user_ids", user_ids), ("excludes", excludes)):
            if given is not None and len(given) != len(histories):
                raise CrabError(f"{name}: expected one per history ({len(histories)}), got {len(given)}")
        one = len(histories) == 1 and rows is None
        if rows is not None and len(rows) != len(histories):
            raise CrabError(f"rows: expected one per history ({len(histories)}), got {len(rows)}")

        def named(r: int, what: str, many: str | None = None) -> str:  # history, history 3, user_ids[3], row 5: history
            if rows is not None:
                return f"{rows[r]}: {what}"
            return what if one else f"{many}[{r}]" if many else f"{what} {r}"

        if user_ids is not None:
            known = self.known_users()
            user = [known.user(u, named(r, "user_id", "user_ids")) for r, u in enumerate(user_ids)]
        else:
            user = [0] * len(histories) if users is None else [self.user_index(u, r) for r, u in enumerate(users)]
        found = []
        for r, h in enumerate(histories):
            if h is None and user_ids is None:
                raise CrabError(named(r, "history") + ": missing; give item ids (or a user id)")
            found.append(
                self.known_users().sequence(user[r])
                if h is None
                else self.indices(h, named(r, "history"), drop_unknown)
            )
        also = self.excluded(exclude)
        own = [self.known(e, named(r, "exclude", "excludes")) for r, e in enumerate(excludes or [])]
        if not own and not len(also):  # the common request: the history alone, as it is
            seen = found if exclude_seen else None
        else:
            seen = []
            for r, history in enumerate(found):
                row = [np.asarray(history, dtype=np.int64)] if exclude_seen else []
                seen.append(np.concatenate([*row, *own[r : r + 1], also]))
        return Samples.from_rows(user, found, [0] * len(found), self.max_history, seen=seen)

    def indices(self, history: Sequence[ItemId], where: str, drop_unknown: bool) -> list[int]:
        """The catalogue indices of a history's item ids (``where``: how errors name the history)."""
        ids = item_ids(history, where)
        unknown = [i for i in ids if i not in self.index]
        if unknown and not drop_unknown:
            shown = ", ".join(self._unknown(u) for u in unknown[:5]) + (" …" if len(unknown) > 5 else "")
            raise CrabError(
                f"{where}: {len(unknown)} item id(s) not in this run's catalogue of {len(self.item_ids)} items: "
                f"{shown}{self._by_title(unknown)} (--drop-unknown or drop_unknown=True drops them; items that arrived "
                "after training join with --new-items or new_items=)"
            )
        known = [self.index[i] for i in ids if i in self.index]
        if not known:
            raise CrabError(
                f"{where}: empty" + (" after dropping unknown items" if ids else "") + "; expected item ids"
            )
        return known

    def _by_title(self, unknown: list[str]) -> str:
        """Where the unknown ids, read as one text, are part of item titles (``--history "Toy Story"``): a clause
        naming the ids of the first three such items; else nothing."""
        typed = " ".join(unknown).strip()
        if len(typed) < 3:
            return ""
        hits = [i for i, title in enumerate(self.titles) if typed.lower() in title.lower()]
        if not hits:
            return ""
        shown = ", ".join(f"{self.item_ids[i]} ({clip(self.titles[i], 40)!r})" for i in hits[:3])
        more = f" and {len(hits) - 3:,} more" if len(hits) > 3 else ""
        return f"; items are given by id, and {clip(typed, 40)!r} is in the title of {shown}{more}"

    def _unknown(self, item: str) -> str:
        """An unknown item id as an error shows it, with the catalogue's id it was probably meant for."""
        meant = self.spellings.meant(item)
        return repr(clip(item, 40)) + (f" (the catalogue writes {clip(meant, 40)!r})" if meant is not None else "")

    def known_users(self):
        """The run's users (:class:`~crabrec.data.users.UserHistories`): their ids and known histories."""
        if self._users is None:
            from crabrec.runfiles import RunFiles

            self._users = RunFiles(self.run_dir).load_users()
        return self._users

    def history(self, user_id: str | int) -> list[str]:
        """The item ids the run's data holds for the user the data called ``user_id``, oldest first."""
        users = self.known_users()
        return [self.item_ids[i] for i in users.sequence(users.user(user_id))]

    @staticmethod
    def user_index(user: Any, row: int) -> int:
        if not is_user_index(user):
            hint = " (users of the data by their ids go in user_ids)" if isinstance(user, str) else ""
            raise CrabError(f"users[{row}]: expected a user index from 0 to 2^63 - 1, got {clip(repr(user), 40)}{hint}")
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


def item_ids(given: Any, where: str) -> list[str]:
    """``given``, a list of item ids (an int read as its decimal string), as strings; anything else is an error
    naming ``where``."""
    given = _listed(given)
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise CrabError(f"{where}: expected a list of item ids, got {type(given).__name__}")
    if all(kind is str for kind in set(map(type, given))):  # the common case, without a check per item
        return list(given)
    ids = []
    for item in given:
        if isinstance(item, bool) or not isinstance(item, str | int | np.integer):
            raise CrabError(f"{where}: item ids are strings, got {clip(repr(item), 40)}")
        ids.append(str(item))
    return ids


def _listed(value: Any) -> Any:
    """An array of ids (or of id lists) as the list it holds: a numpy array, a pandas Series or Index (a column, a
    ``groupby(...).agg(list)``), a torch tensor; anything else as it is."""
    if getattr(value, "ndim", 0) >= 1 and callable(getattr(value, "tolist", None)):
        return value.tolist()
    return value


def _utf8(text: str) -> str:
    """``text`` with any lone surrogate (a ``\\ud800`` escape in the source JSON) replaced, so it encodes as UTF-8."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def load(
    run_dir: str | Path,
    method: str = "mor",
    *,
    beam: int | None = None,
    new_items: str | Path | NewItems | pd.DataFrame | pa.Table | None = None,
    new_share: float | None = None,
    unavailable: str | Path | Sequence[ItemId] | None = None,
) -> Recommender:
    """The trained ``method`` of the run at ``run_dir`` (a folder ``crabrec run`` wrote).

    ``beam``: the beam width (the longest list) of a generative method; default the run's ``evaluate.beam``.
    ``new_items``: an item table of items to add to the catalogue (:mod:`crabrec.new_items`: a file, a pandas
    DataFrame or a pyarrow Table), or the items
    :func:`crabrec.new_items.read` made of one (to encode them once for several methods); ``new_share`` (None:
    ``NEW_SHARE``): the most of every top-k they take after the generated SIDs they share tokens with.
    ``unavailable``: items never to recommend (:meth:`Recommender.set_unavailable`): a list of item ids, or a file of
    them (:func:`crabrec.unavailable.read_ids`: a ``.txt`` of one id a line, or an item table)."""
    from crabrec.config import load_saved
    from crabrec.methods import get, methods
    from crabrec.runfiles import RunFiles, run_folder
    from crabrec.stages import registry

    if not isinstance(run_dir, str | Path):
        raise CrabError(f"run_dir: expected a path to a run folder, got {type(run_dir).__name__}")
    root = run_folder(run_dir)
    if isinstance(method, str) and (root / "models" / method).is_dir() and method not in {m.name for m in methods()}:
        raise CrabError(
            f"method {method!r}: this run holds its results (models/{method}), but no method of that name is installed "
            "here; install the package that provides it (`crabrec methods` lists what is installed)"
        )
    chosen = get(method, flag="method")  # the CLI's --method and the Python API's method=
    method = chosen.name  # as the run's files name it (``MOR`` or ``D²LR`` typed)
    if chosen.ranker is None:
        raise CrabError(f"method {method!r}: this method cannot rank histories")
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int) or beam < 1):
        raise CrabError(f"beam={beam!r}: expected an integer ≥ 1")
    cfg = load_saved(root)
    files = RunFiles(root)
    if chosen.trains and files.load_state(chosen.trains) is None:  # not trained, or its training did not finish
        raise CrabError(
            f"{run_dir}: {method} is not trained in this run (its stage {chosen.trains!r} has not finished); "
            f"`crabrec train {run_dir} --method {method}` trains it"
        )
    for name, stage in registry().items():  # what a ranker reads is what its stage wrote
        if stage.checked_outputs:
            files.check_written(name)
    if new_items is None and new_share is not None:
        raise CrabError(
            "new_share (--new-share) goes with new_items (--new-items): the share of each list they may take"
        )
    if new_items is not None:
        from crabrec.new_items import NewItems, WithNewItems, read

        if chosen.sids == "none":
            raise CrabError(
                f"method {method!r} ranks only the items it was trained on (by their ids), so it cannot take new "
                "items; a method that ranks semantic IDs can (mor, tiger, crab, ppd, rr ...)"
            )
        from crabrec.data.objects import is_table, type_name

        if not (isinstance(new_items, str | os.PathLike | NewItems) or is_table(new_items)):
            raise CrabError(
                "new_items: expected the path of an item table, a pandas DataFrame, a pyarrow Table or a table with "
                f"to_arrow() (polars), got {type_name(new_items)}"
            )
        new_share = NEW_SHARE if new_share is None else new_share
        if isinstance(new_share, bool) or not isinstance(new_share, int | float) or not 0 <= new_share <= 1:
            raise CrabError(f"new_share={clip(repr(new_share), 40)}: expected a share from 0 to 1")
        new_items = new_items if isinstance(new_items, NewItems) else read(root, new_items)
        files = WithNewItems(root, new_items)
    ranker = chosen.ranker(files, cfg, beam)
    if new_items is not None:
        from crabrec.new_items import NewItemSlots

        ranker = NewItemSlots(ranker, files.n_items() - len(new_items), float(new_share))
    rec = Recommender(root, method, ranker, files.load_items(), files.load_popularity(), cfg.data.max_history)
    if unavailable is not None:
        from crabrec.unavailable import given_ids

        rec.set_unavailable(*given_ids(unavailable, cfg.data))
    return rec
