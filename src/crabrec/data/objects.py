"""Tables given as Python objects rather than files (a pandas DataFrame, a pyarrow Table): told apart from paths,
checked, and turned into the pyarrow Table a Parquet file of them would hold."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from crabrec.errors import CrabError, clip, listed, reason

if TYPE_CHECKING:
    import pyarrow as pa


def is_table(value: Any) -> bool:
    """Whether ``value`` is a table object (a pandas DataFrame or a pyarrow Table); the libraries are not imported
    to tell."""
    pd, pa = sys.modules.get("pandas"), sys.modules.get("pyarrow")
    return (pd is not None and isinstance(value, pd.DataFrame)) or (pa is not None and isinstance(value, pa.Table))


def checked(value: Any, argument: str) -> Any:
    """``value`` when it is a path or a table object; a :class:`CrabError` naming ``argument`` otherwise."""
    if value is None or isinstance(value, str | os.PathLike) or is_table(value):
        return value
    raise CrabError(
        f"{argument}: expected a file or folder path, a pandas DataFrame or a pyarrow Table; got {type(value).__name__}"
    )


def arrow(value: Any, argument: str) -> pa.Table:
    """The table object ``value`` as a pyarrow Table without pandas' metadata: a DataFrame's named index levels
    become columns; columns named by numbers, named twice or holding values of several types, and an empty table,
    are a :class:`CrabError` naming ``argument``."""
    import pyarrow as pa

    if isinstance(value, pa.Table):
        table = value
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
        try:
            table = pa.Table.from_pandas(frame, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            column = next((n for n in names if _untyped(frame[n])), None)
            where = f"column {column!r}" if column is not None else "a column"
            raise CrabError(
                f"{argument}: {where} of the DataFrame cannot be stored as a table ({clip(reason(exc), 120)}); "
                "expected one type a column (ids as strings or as integers)"
            ) from None
    if table.num_columns == 0 or table.num_rows == 0:
        raise CrabError(f"{argument}: the table has no {'columns' if table.num_columns == 0 else 'rows'}")
    return table.replace_schema_metadata(None)


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
