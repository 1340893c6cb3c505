"""Explicit ratings as implicit feedback: ``data.min_rating`` keeps the interactions rated at least that much (the
usual "rated 4 or more is a positive" protocol), before k-core filtering. Without it every rating is an interaction
and its value is ignored."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pandas as pd

from crabrec.errors import CrabError, clip

log = logging.getLogger("crabrec")

# a table's rating column when ``data.rating_col`` is at its default and absent (compared as column names are)
RATING_NAMES = ("rating", "ratings", "score", "stars", "star_rating", "overall", "rate", "review_score")


def rated_at_least(
    values: pd.Series, min_rating: float, where: str, column: str, at: Callable[[int], str]
) -> np.ndarray:
    """The rows whose rating in ``values`` is at least ``min_rating``. A cell that is not a number is a one-line
    error naming where its row stands (``at(row)``: ``FILE: line N``); keeping no row is one too (naming
    ``where``)."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        numbers = values.to_numpy(dtype=np.float64, na_value=np.nan)  # (Netflix's, Parquet's: no text a row)
    else:
        numbers = pd.to_numeric(values.astype(str).str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if len(bad):
        row = int(bad[0])
        raise CrabError(
            f"{at(row)}: {column} {clip(repr(str(values.iloc[row])))} is not a number; data.min_rating "
            "reads every interaction's rating (fix the row, or remove data.min_rating)"
        )
    keep = numbers >= min_rating
    if not keep.any():
        raise CrabError(
            f"{where}: no interaction is rated {min_rating:g} or more (the {column} column runs from "
            f"{numbers.min():g} to {numbers.max():g}); lower data.min_rating"
        )
    log.info(
        "%s: %s of %s interactions rated %g or more kept (data.min_rating)",
        where, f"{int(keep.sum()):,}", f"{len(keep):,}", min_rating,
    )  # fmt: skip
    return keep
