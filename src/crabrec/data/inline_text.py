"""Item text written in the interaction table itself, for data without an item table: Last.fm-1K's artist and track
names, Online Retail's ``Description``, a playlist's track records.

A column is an item attribute when it holds words (not only numbers or codes), more than one value, and one value
per item:
over the rows of items met more than once, at least :data:`ONE_VALUE` of them hold their item's most common value
(a user's rating, country or review text varies within an item). Each item's text is its most common value in each
such column. The text is used only when it tells most items apart (:data:`DISTINCT`): a genre alone would give many
items one text, and the items' SASRec embeddings tell them apart better.
"""

from __future__ import annotations

import logging

import pandas as pd

from crabrec.data.reading import NULLS, NUMBER, id_cells

log = logging.getLogger("crabrec")

ONE_VALUE = 0.95  # the share of an attribute's rows that hold their item's most common value
DISTINCT = 0.5  # the share of items whose text no other item has, at least
CODES = 0.9  # a column whose distinct values are this share of one-word codes with digits holds ids, not words


def text_columns(inter: pd.DataFrame, taken: tuple[str | None, ...]) -> list[str]:
    """The columns, other than ``taken``, that hold words: not only numbers, and not codes (almost every value one
    word with a digit in it: another id, a UUID, a date)."""
    out = []
    for c in inter.columns:
        if c in taken:
            continue
        try:  # each value once: a column's rows repeat them
            cells = id_cells(pd.Series(inter[c].unique())).str.strip()
        except TypeError:  # cells that cannot be compared as they are (Parquet lists): as their text
            cells = id_cells(inter[c]).str.strip()
        values = pd.Series(cells[(cells != "") & ~cells.str.lower().isin(NULLS)].unique())
        if values.empty or values.str.fullmatch(NUMBER.pattern).all():
            continue
        codes = ~values.str.contains(r"\s") & values.str.contains(r"[0-9]")
        if codes.mean() < CODES:
            out.append(c)
    return out


def inline_items(
    inter: pd.DataFrame, item: str, taken: tuple[str | None, ...]
) -> tuple[dict[str, dict[str, str]], str] | None:
    """Each item's text from the item attributes among ``inter``'s columns (see the module), and a note naming
    them; None when no column is one, or their text does not tell most items apart."""
    ids = id_cells(inter[item]).str.strip()
    counts = ids.value_counts()
    repeated = ids.isin(counts.index[counts >= 2]).to_numpy()
    attributes: dict[str, pd.Series] = {}
    for c in text_columns(inter, (item, *taken)):
        cells = id_cells(inter[c]).str.strip()
        rows = pd.DataFrame({"item": ids, "value": cells})[repeated & (cells != "").to_numpy()]
        if rows.empty or rows["value"].nunique() < 2:
            continue
        pairs = rows.groupby(["item", "value"], sort=False).size()
        if pairs.groupby(level=0).max().sum() >= ONE_VALUE * len(rows):
            attributes[c] = cells
    if not attributes:
        return None
    frame = pd.DataFrame({"item": ids, **attributes})
    records: dict[str, dict[str, str]] = {raw: {} for raw in ids.unique()}
    for c in attributes:
        filled = frame[frame[c] != ""]
        top = filled.groupby(["item", c], sort=False).size().sort_values(ascending=False, kind="stable")
        for raw, value in top.index.to_frame(index=False).drop_duplicates("item").itertuples(index=False):
            records[raw][c] = value
    texts = pd.Series([" ".join(rec.values()) for rec in records.values()])
    unique = int((~texts.duplicated(keep=False)).sum())
    names = ", ".join(attributes)
    if unique < DISTINCT * len(records):
        log.info(
            "columns %s hold one value per item, but give %d of %d items a text of their own: ids-only data",
            names, unique, len(records),
        )  # fmt: skip
        return None
    note = (
        f"item text from the interactions' columns {names} (one value per item; names can be weak item text: compare "
        "--set tokenize.item_vectors=text+sasrec on validation)"
    )
    return records, note
