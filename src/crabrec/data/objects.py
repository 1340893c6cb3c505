"""Tables given as Python objects rather than files (a pandas DataFrame, a pyarrow Table): told apart from paths,
checked, and turned into the pyarrow Table a Parquet file of them would hold."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from crabrec.errors import CrabError, clip, listed, reason

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("crabrec")


def is_table(value: Any) -> bool:
    """Whether ``value`` is a table object: a pandas DataFrame, a pyarrow Table, or a table that gives one with
    ``to_arrow()`` (a polars DataFrame); the libraries are not imported to tell."""
    pd, pa = sys.modules.get("pandas"), sys.modules.get("pyarrow")
    return (
        (pd is not None and isinstance(value, pd.DataFrame))
        or (pa is not None and isinstance(value, pa.Table))
        or (not isinstance(value, type) and callable(getattr(value, "to_arrow", None)))
    )


def checked(value: Any, argument: str) -> Any:
    """``value`` when it is a path or a table object; a :class:`CrabError` naming ``argument`` otherwise."""
    if value is None or isinstance(value, str | os.PathLike) or is_table(value):
        return value
    raise CrabError(
        f"{argument}: expected a file or folder path, a pandas DataFrame, a pyarrow Table or a table with to_arrow() "
        f"(polars); got {type_name(value)}"
    )


def type_name(value: Any) -> str:
    """``value``'s type as a message names it: ``list``, ``polars.dataframe.frame.DataFrame``."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def arrow(value: Any, argument: str) -> pa.Table:
    """The table object ``value`` as a pyarrow Table without pandas' metadata, its long strings as plain ones
    (pandas 3 and polars give the same file as pandas 2): a DataFrame's named index levels become columns, and a
    column of strings and numbers (ids from two sources) holds strings; columns named by numbers or named twice, a
    column of values pyarrow cannot type, and an empty table are a :class:`CrabError` naming ``argument``."""
    import pyarrow as pa

    if isinstance(value, pa.Table):
        table = value
    elif not _is_pandas(value):  # a table that gives its pyarrow Table (polars)
        try:
            table = value.to_arrow()
        except Exception as exc:  # whatever the other library raises about its table
            raise CrabError(f"{argument}: {type_name(value)}.to_arrow() failed ({reason(exc)})") from None
        if not isinstance(table, pa.Table):
            raise CrabError(f"{argument}: {type_name(value)}.to_arrow() gave {type_name(table)}, not a pyarrow Table")
    else:
        frame = value.reset_index() if any(n is not None for n in value.index.names) else value
        unnamed = [c for c in frame.columns if not isinstance(c, str)]
        if unnamed:
            raise CrabError(
                f"{argument}: the DataFrame's columns are named {listed(unnamed, 60)}, not by what they hold; name "
                "them (df.columns = ['user_id', 'item_id', 'timestamp', ...])"
            )
        names = list(frame.columns)
        if len(set(names)) < len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise CrabError(f"{argument}: the DataFrame has the column {twice[0]!r} twice; expected one of each")
        table = _from_pandas(frame, argument)
    if table.num_columns == 0 or table.num_rows == 0:
        raise CrabError(f"{argument}: the table has no {'columns' if table.num_columns == 0 else 'rows'}")
    small = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}  # as pandas 2 gives them: one file
    schema = pa.schema([f.with_type(small.get(f.type, f.type)) for f in table.schema])  # for one table's content
    with contextlib.suppress(pa.ArrowInvalid):  # (a chunk of over 2 GB of text stays long)
        table = table.cast(schema)
    return table.replace_schema_metadata(None)


def _is_pandas(value: Any) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.DataFrame)


def _from_pandas(frame: Any, argument: str, again: bool = False) -> pa.Table:
    """``frame`` as a pyarrow Table; a column of strings and numbers (ids from two sources) as strings, as a file of
    them reads, and any other column pyarrow cannot type a :class:`CrabError`."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        untyped = [n for n in frame.columns if frame[n].dtype == object and _untyped(frame[n])]
        mixed = [] if again else [n for n in untyped if _scalars(frame[n])]
        if mixed:
            log.info("%s: column(s) %s hold strings and numbers: read as strings", argument, listed(mixed, 80))
            strings = {n: [None if _missing(v) else str(v) for v in frame[n]] for n in mixed}
            return _from_pandas(frame.assign(**strings), argument, again=True)
        where = f"column {untyped[0]!r}" if untyped else "a column"
        raise CrabError(
            f"{argument}: {where} of the DataFrame cannot be stored as a table ({clip(reason(exc), 120)}); expected "
            "one type a column, or strings and numbers"
        ) from None


def _scalars(column: Any) -> bool:
    """Whether every cell of ``column`` is a string, a number, a boolean or missing (nothing nested)."""
    import numpy as np

    return all(v is None or isinstance(v, str | int | float | bool | np.generic) for v in column)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _untyped(column: Any) -> bool:
    import pyarrow as pa

    try:
        pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return True
    return False


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` written as Parquet, in memory (the same table gives the same bytes with the same pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()
