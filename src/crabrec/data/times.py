"""A table's time column as Unix seconds: numbers (seconds, or milliseconds and finer) or dates. ISO 8601 dates
are read as such; a date that writes its day and month as numbers is read in the one order its column shows;
``data.time_format`` names any other format. Every problem is one line naming the file's row."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from crabrec.data.reading import Origin
from crabrec.errors import CrabError, clip

# a date that writes its day and month as numbers, either first: 04/12/1997, 4.12.97 15:55, 04-12-1997
DAY_MONTH = re.compile(r"^(?P<first>\d{1,2})(?P<sep>[./-])(?P<second>\d{1,2})(?P=sep)\d{2,4}(?!\d)")


def per_second(numbers: np.ndarray) -> float:
    """How many units of a column of Unix times make a second: 1e3 (milliseconds), 1e6 or 1e9 when the median is
    too large for seconds (no date before the year 5138 is, every one after 1973-03-03 is in milliseconds); the
    median, so that a stray 0 or small placeholder does not make the others seconds; else 1."""
    middle = float(np.median(np.abs(numbers))) if len(numbers) else 0.0
    return next((scale / 1e8 for scale in (1e17, 1e14, 1e11) if middle >= scale), 1.0)


def _all_numbers(values: pd.Series) -> np.ndarray | None:
    """A column of text (Arrow strings, as pandas reads a table) whose every cell is a finite number, as floats, cast
    by Arrow (a tenth of the time and memory of ``pd.to_numeric``, which makes a Python string a row); else None."""
    if not isinstance(values.dtype, pd.StringDtype) or values.dtype.storage != "pyarrow":
        return None
    # a cell that is no number (a date, a typo) fails the cast: the general path then reads the column and names the row
    try:
        numbers = pc.cast(pc.utf8_trim_whitespace(values.array.__arrow_array__()), pa.float64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return numbers if len(numbers) and np.isfinite(numbers).all() else None


def timestamps(values: pd.Series, origin: Origin, column: str, time_format: str | None = None) -> np.ndarray:
    """Unix seconds from a column of numbers (seconds; milliseconds, microseconds or nanoseconds when their median
    is too large to be seconds) or of dates (:func:`_dates`); ``origin``: where the values' rows stand (their index:
    each row's label), for messages; ``time_format``: a strftime format every value is read with
    (``data.time_format``)."""
    if time_format is None and (numbers := _all_numbers(values)) is not None:
        return numbers / per_second(numbers)
    text = values.astype(str).str.strip()
    if time_format is not None:
        dates = pd.to_datetime(text, errors="coerce", utc=True, format=time_format)
        _no_date(dates, values, origin, column, f"does not match data.time_format {time_format!r}")
        return _seconds(dates)
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)  # NaN: not a number; inf stays
    parsed = ~np.isnan(numbers)
    if parsed.mean() > 0.5:  # Unix time: a value that is not a finite number is a typo, not a date
        bad = np.flatnonzero(~np.isfinite(numbers))
        if len(bad):
            row = int(bad[0])
            kind = "is not a finite number" if parsed[row] else "is not a number"
            raise CrabError(
                f"{_at(values, row, origin)}: {column} {clip(repr(values.iloc[row]))} {kind} (the "
                "other rows are Unix time); fix the row, or --set data.time_col=null to order each user's rows as "
                "they appear"
            )
        return numbers / per_second(numbers)
    if parsed.any():  # "1001" among dates would be read as the year 1001
        row = int(np.flatnonzero(parsed)[0])
        raise CrabError(
            f"{_at(values, row, origin)}: {column} {clip(repr(values.iloc[row]))} is a number, but "
            f"{int((~parsed).sum())} of the {len(parsed)} rows are dates; write every time the same way (all Unix "
            "time or all dates), or --set data.time_col=null to order each user's rows as they appear"
        )
    dates = _dates(text, values, origin, column)
    _no_date(dates, values, origin, column, "is neither Unix time nor a date (e.g. 2023-01-06 05:00:00)")
    return _seconds(dates)


def _dates(text: pd.Series, values: pd.Series, origin: Origin, column: str) -> pd.Series:
    """The dates of a column (NaT where a value is none): ISO 8601, else each value as pandas reads it, with a day
    and a month written as numbers (``04/12/1997``, ``04.12.1997``) read in the one order the column's values show:
    day first when a first number is above 12, month first when a second one is. Values of both orders, or none that
    tells, are an error asking for ``data.time_format``."""
    dates = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    rest = dates.isna().to_numpy()
    if not rest.any():
        return dates
    parts = text.str.extract(DAY_MONTH)
    first, second = (pd.to_numeric(parts[k]).to_numpy(dtype=np.float64) for k in ("first", "second"))
    numeric = rest & ~np.isnan(first)
    day_first, month_first = (np.flatnonzero(numeric & (n > 12)) for n in (first, second))

    def shown(rows: np.ndarray) -> str:
        path, n = origin.line(values.index[int(rows[0])])
        where = f"{path.name} row {n}" if origin.parts else f"row {n}"
        return f"{where}: {clip(repr(values.iloc[int(rows[0])]))}"

    fix = "set data.time_format (e.g. --set data.time_format=%d/%m/%Y for day first)"
    if len(day_first) and len(month_first):
        raise AmbiguousDates(
            f"{origin.path}: {column} writes dates day first ({shown(day_first)}) and month first "
            f"({shown(month_first)}); write them one way, or {fix}"
        )
    unclear = np.flatnonzero(numeric & (first != second))
    if not len(day_first) and not len(month_first) and len(unclear):
        raise AmbiguousDates(
            f"{origin.path}: {column}: no date tells whether the day or the month comes first ({shown(unclear)} has "
            f"both at most 12); {fix}"
        )
    for rows, dayfirst in ((numeric, len(day_first) > 0), (rest & ~numeric, False)):
        if rows.any():
            dates[rows] = _each(text[rows], dayfirst)
    return dates


# formats pandas does not guess from a value: Goodreads' and Twitter's ``Mon Aug 01 13:41:57 -0700 2016``, a web
# server log's ``01/Aug/2016:13:41:57 -0700``
KNOWN_FORMATS = ("%a %b %d %H:%M:%S %z %Y", "%d/%b/%Y:%H:%M:%S %z")
SAMPLE = 1000  # values a format must read before it reads the column


def _each(text: pd.Series, dayfirst: bool) -> pd.Series:
    """Each value read as a date on its own (NaT where it is none); each distinct value is parsed once. When the
    format of the first value (as pandas guesses it, or one of ``KNOWN_FORMATS``) reads the first ``SAMPLE`` values,
    it reads them all, and only the values it does not read are parsed one by one: the same dates, at a tenth of the
    time or less."""
    distinct = pd.Series(pd.unique(text.to_numpy()))
    parsed = _one_format(distinct, dayfirst)
    rest = parsed.isna().to_numpy() if parsed is not None else np.ones(len(distinct), dtype=bool)
    if rest.any():
        each = pd.to_datetime(distinct[rest], errors="coerce", utc=True, format="mixed", dayfirst=dayfirst)
        parsed = each if parsed is None else parsed.mask(rest, each)
    return parsed.set_axis(pd.Index(distinct)).reindex(text.to_numpy()).set_axis(text.index)


def _one_format(values: pd.Series, dayfirst: bool) -> pd.Series | None:
    """``values`` read in the one format that reads the first ``SAMPLE`` of them (NaT where it reads none), or None
    when no format does."""
    if not len(values):
        return None
    first = str(values.iloc[0]).strip()
    for fmt in dict.fromkeys([_guessed_format(first, dayfirst), *KNOWN_FORMATS]):
        if fmt is None or "%y" in fmt:  # two-digit years: 70 is 1970 to a format, 2070 to a date read on its own
            continue
        sample = pd.to_datetime(values.iloc[:SAMPLE], errors="coerce", utc=True, format=fmt)
        if not sample.isna().any():
            return pd.to_datetime(values, errors="coerce", utc=True, format=fmt)
    return None


def _guessed_format(value: str, dayfirst: bool) -> str | None:
    """The strftime format pandas guesses for ``value`` (None when it guesses none)."""
    try:
        from pandas.tseries.api import guess_datetime_format
    except ImportError:  # pandas before 2.2
        from pandas._libs.tslibs.parsing import guess_datetime_format
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Parsing dates in %m %d, %Y format when dayfirst=True was specified"
        return guess_datetime_format(value, dayfirst=dayfirst)


class AmbiguousDates(CrabError):
    """A column of dates whose day and month order is not known (``data.time_format`` tells it)."""


def _no_date(dates: pd.Series, values: pd.Series, origin: Origin, column: str, why: str) -> None:
    bad = np.flatnonzero(dates.isna().to_numpy())
    if len(bad):
        row = int(bad[0])
        raise CrabError(
            f"{_at(values, row, origin)}: {column} {clip(repr(values.iloc[row]))} {why}; fix the "
            "row, or --set data.time_col=null to order each user's rows as they appear"
        )


def _at(values: pd.Series, row: int, origin: Origin) -> str:
    """``FILE: row N``: where the value at position ``row`` of ``values`` stands (its index is the row's place among
    the rows read, kept when rows are dropped)."""
    return origin.row(values.index[row])


def _seconds(dates: pd.Series) -> np.ndarray:
    return (dates - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds().to_numpy(dtype=np.float64)
