"""Items a trained run must not recommend: discontinued, out of stock, withdrawn (``crabrec.load(...,
unavailable=...)``, ``crabrec recommend --unavailable``, ``crabrec serve --unavailable``; per request
``exclude=``, per history ``excludes=`` or an ``exclude`` column of ``--input``).

They stay in the catalogue: a history may hold them, and the model reads them as before. They are left out inside
the search, so a list keeps its ``k`` items: a ranker leaves the unavailable items out itself
(:class:`crabrec.rankers.LeavesOut`; the beam search runs on the trie without their SIDs), and a request's are
excluded as the history's own items are (:mod:`crabrec.decode.exclude`). Ids the catalogue does not hold are left
aside: the run never recommends them anyway.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def read_ids(source: str | Path, data) -> list[str]:
    """The item ids listed in ``source``: a ``.txt`` file of one id a line, or an item table (the formats ``--items``
    takes) with an id column (the run's item table's, its item column's name, or ``item_id``, ``item``, ``id`` …).
    ``data``: the run's data config."""
    from crabrec.data.reading import id_cells
    from crabrec.data.table import read_item_table
    from crabrec.io import read_input_text
    from crabrec.new_items import id_column

    path = Path(source)
    if path.suffix.lower() == ".txt":
        return [line.strip() for line in read_input_text(path).splitlines() if line.strip()]
    table = read_item_table(path)
    column = id_column(path, [str(c) for c in table.columns], data, hint=", or list the ids one a line in a .txt file")
    return [i for i in id_cells(table[column]).str.strip().tolist() if i]  # spelled as the data's ids are


def given_ids(given: str | os.PathLike | Sequence[str | int], data) -> tuple[Sequence[str | int], str]:
    """``(ids, name)``: the ids ``given`` as a file (read with :func:`read_ids`) or as a list, and how messages name
    them (the file, or ``unavailable``)."""
    if isinstance(given, str | os.PathLike):
        return read_ids(given, data), str(given)
    return given, "unavailable"
