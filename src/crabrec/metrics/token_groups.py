"""The token-group analysis (docs/METHOD.md, "Token groups"): GU of the items under popular (T_pop) vs
unpopular (T_unp) tokens at each level."""

from __future__ import annotations

import numpy as np

from crabrec.metrics.fairness import subset_gu
from crabrec.sid.codebook import Codebook


def token_group_gu(
    codebook: Codebook,
    freq: np.ndarray,
    rankings: np.ndarray,
    histories: np.ndarray,
    k: int = 10,
    share: float = 0.05,
) -> list[dict[str, object]]:
    """Per semantic level: GU of G_pop (items whose token is in T_pop), G_neu, G_unp, and the pop-unp gap."""
    rows = []
    for level in range(codebook.semantic_levels):
        groups = codebook.token_groups(freq, level, share)
        row: dict[str, object] = {"level": codebook.prefixes[level]}
        for name, tokens in groups.items():
            members = np.isin(codebook.codes[:, level], tokens)
            row[name] = subset_gu(rankings, histories, members, k)
        row["gap"] = row["pop"]["GU"] - row["unp"]["GU"]  # type: ignore[index]
        rows.append(row)
    return rows
