"""Ids as a person reads them: an id typed another way than the data writes it (``'25'`` for ``'25.0'``, ``'b0001'``
for ``'B0001'``) is found by its :func:`id_key`, so that an error can say what was probably meant."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation


def id_key(raw: str) -> str:
    """An id as a person reads it: case and surrounding spaces ignored, a number by its value (``'025'``, ``'25.0'``
    and ``'25'`` are one key)."""
    text = raw.strip().lower()
    try:
        number = Decimal(text)
    except InvalidOperation:
        return text
    if not number.is_finite() or abs(number.adjusted()) > 100:  # "1e999999999" is not written out
        return text
    return format(number.normalize(), "f")


class Spellings:
    """The ids of a catalogue or of a run's users by :func:`id_key` (the first id of each key), built when first
    asked."""

    def __init__(self, ids: Iterable[str]) -> None:
        self._ids = ids
        self._by_key: dict[str, str] | None = None

    def meant(self, typed: str) -> str | None:
        """The id written another way that ``typed`` stands for, or None."""
        if self._by_key is None:
            self._by_key = {}
            for known in self._ids:
                self._by_key.setdefault(id_key(known), known)
        return self._by_key.get(id_key(typed))
