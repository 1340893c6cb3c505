"""Order lines joined to their orders: a folder whose items are bought in orders, one table of the orders' lines
(Instacart's ``order_products__prior.csv``: ``order_id``, ``product_id``; no user column) and one of the orders
(``orders.csv``: ``order_id``, ``user_id``, ``order_number`` ...). Each line takes its order's user and the order's
other columns, and the lines follow the orders table's row order (then their own), so a dataset without times keeps
each user's orders in the order that table lists them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from crabrec.data.reading import Origin, first_row, id_cells, read_parts, read_table, unfilled
from crabrec.errors import CrabError, clip

if TYPE_CHECKING:
    from crabrec.data.table import Parts

log = logging.getLogger("crabrec")


@dataclass(frozen=True)
class Joined:
    """The lines (one table, or :class:`~crabrec.data.table.Parts` of tables with the same columns) of the orders
    in ``orders``, joined on the column ``key`` that both hold; ``user`` is the orders' user column."""

    lines: Path | Parts
    orders: Path
    key: str
    user: str  # the orders' user column

    @property
    def files(self) -> tuple[Path, ...]:
        """The tables of the lines."""
        return (self.lines,) if isinstance(self.lines, Path) else self.lines.paths

    def names(self) -> str:
        """``order_products__prior.csv, order_products__train.csv joined to orders.csv by order_id``."""
        return f"{', '.join(p.name for p in self.files)} joined to {self.orders.name} by {self.key}"


def find_join(
    lines: list[Path], orders: list[Path], columns: dict[Path, list[str]], item_of: Callable[[list[str]], str | None]
) -> tuple[list[Path], Path, str] | None:
    """Among tables with an item column and no user column (``lines``) and tables with a user column and no item
    column (``orders``), the lines and the one orders table they join to: each line table holds exactly one column of
    that table besides the item column (the order's id), the same for all. None when no such pair is found; lines
    that could join to several tables are a one-line error naming them."""
    pairs: dict[tuple[Path, str], list[Path]] = {}
    for p in lines:
        item = item_of(columns[p])
        for q in orders:
            shared = [c for c in columns[p] if c in columns[q] and c != item]
            if len(shared) == 1:
                pairs.setdefault((q, shared[0]), []).append(p)
    if len(pairs) > 1:
        found = ", ".join(f"{q.name} by {key}" for q, key in pairs)
        raise CrabError(
            f"{lines[0].parent}: the order lines ({', '.join(p.name for p in lines)}) join to several tables of "
            f"users ({found}); name the interactions with --data FILE"
        )
    if not pairs:
        return None
    ((order_table, key), joined), = pairs.items()
    return joined, order_table, key


def read_joined(joined: Joined, folder: Path, drop: bool = False) -> tuple[pd.DataFrame, Origin, list[str]]:
    """The lines of ``joined`` with their order's columns (its ``key`` once), in the orders table's order; their
    ``Origin`` names each line's own file and row. Also the notes to keep: the lines of orders the table lacks are
    left out (a warning); an order listed twice, or one of some lines without a user, is a one-line error naming
    its row (``drop``, ``data.incomplete_rows=drop``: its lines are left out later, as rows with an empty cell)."""
    lines, origin = read_parts(folder, joined.files)  # rows named by their file, the columns by the folder
    orders = read_table(joined.orders)
    order_ids = _ids(orders[joined.key])
    if (twice := order_ids.duplicated().to_numpy()).any():
        again = int(np.argmax(twice))
        once = int(np.argmax((order_ids == order_ids.iloc[again]).to_numpy()))
        first = first_row(joined.orders)
        raise CrabError(
            f"{joined.orders}: {joined.key} {clip(order_ids.iloc[again])!r} is on rows {once + first} and "
            f"{again + first}: expected one row per order, to give each of its lines its user"
        )
    # each line's order's row (-1: none), by Arrow's hash lookup (a third of the time of a pandas Index's)
    at = pc.index_in(pa.array(_ids(lines[joined.key])), value_set=pa.array(order_ids)).fill_null(-1).to_numpy()
    notes = []
    if (missing := int((at < 0).sum())) > 0:
        first = origin.row(lines.index[int(np.argmax(at < 0))])
        note = f"left out {missing:,} line(s) of orders that {joined.orders.name} does not list (the first: {first})"
        log.warning("%s: %s", folder, note)
        notes.append(note)
        lines, at = lines[at >= 0], at[at >= 0]
    used = np.zeros(len(orders), dtype=bool)
    used[at] = True
    blank = unfilled(id_cells(orders[joined.user])) & used
    if blank.any() and not drop:
        row = int(np.argmax(blank))
        raise CrabError(
            f"{joined.orders}: row {row + first_row(joined.orders)}: empty user id in column {joined.user!r} "
            f"({int(blank.sum()):,} order(s), {int(blank[at].sum()):,} line(s)); fill it, or --set "
            "data.incomplete_rows=drop to leave out their lines"
        )
    order = np.argsort(at, kind="stable")  # the orders' order, then the lines' own
    lines = lines.iloc[order]
    extra = [c for c in orders.columns if c not in lines.columns]
    theirs = orders[extra].iloc[at[order]].set_axis(lines.index)
    notes.append(f"the lines of {joined.names()}: each line is an interaction of its order's user")
    return pd.concat([lines, theirs], axis=1), origin, notes


def _ids(cells: pd.Series) -> pd.Series:
    """A key column as text, spelled alike in both tables (``7``, not ``7.0`` or `` 7``)."""
    return id_cells(cells).astype(str).str.strip()
