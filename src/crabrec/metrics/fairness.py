"""Group unfairness (IFairLRS; docs/METHOD.md, "Metrics") and the share of exposure going to popular items.

GP@K(G) = share of all top-K slots whose item is in G; GH(G) = share of all history entries in G;
GU@K(G) = GP@K(G) − GH(G); MGU@K = mean_G |GU@K(G)|; DGU@K = max_G GU − min_G GU.
A slot holding a SID shared by m items gives each of them 1/m (``members``).
"""

from __future__ import annotations

import numpy as np


def slot_mass(rankings: np.ndarray, n_items: int, members: list[np.ndarray] | None = None) -> np.ndarray:
    """Exposure mass per item over all slots of ``rankings`` (``-1`` slots are empty and carry no mass)."""
    flat = rankings[rankings >= 0].ravel()
    if members is None:
        return np.bincount(flat, minlength=n_items).astype(np.float64)
    mass = np.zeros(n_items, dtype=np.float64)
    counts = np.bincount(flat, minlength=n_items)
    for rep in np.flatnonzero(counts):
        group = members[rep]
        mass[group] += counts[rep] / len(group)
    return mass


def group_shares(mass: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    total = mass.sum()
    shares = np.bincount(group, weights=mass, minlength=n_groups)
    return shares / total if total > 0 else shares


def group_unfairness(
    rankings: np.ndarray,
    histories: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    ks: tuple[int, ...] = (1, 5, 10, 20),
    members: list[np.ndarray] | None = None,
) -> dict[str, object]:
    """GP, GH, GU per group and MGU/DGU for each K. ``histories``: flat array of all history item ids."""
    n_items = len(group)
    gh = group_shares(np.bincount(histories, minlength=n_items).astype(np.float64), group, n_groups)
    out: dict[str, object] = {"GH": gh.tolist()}
    for k in ks:
        gp = group_shares(slot_mass(rankings[:, :k], n_items, members), group, n_groups)
        gu = gp - gh
        out[f"GP@{k}"] = gp.tolist()
        out[f"GU@{k}"] = gu.tolist()
        out[f"MGU@{k}"] = float(np.abs(gu).mean())
        out[f"DGU@{k}"] = float(gu.max() - gu.min())
    return out


def subset_gu(
    rankings: np.ndarray, histories: np.ndarray, in_group: np.ndarray, k: int, members: list[np.ndarray] | None = None
) -> dict[str, float]:
    """GU of one item set (need not partition the catalogue): its share of slots minus its share of history."""
    n = len(in_group)
    slots = slot_mass(rankings[:, :k], n, members)
    hist = np.bincount(histories, minlength=n).astype(np.float64)
    gp = float(slots[in_group].sum() / slots.sum()) if slots.sum() else 0.0
    gh = float(hist[in_group].sum() / hist.sum()) if hist.sum() else 0.0
    return {"GP": gp, "GH": gh, "GU": gp - gh, "GU_rel": gp / gh - 1.0 if gh > 0 else float("nan")}


def popular_share(rankings: np.ndarray, popular: np.ndarray, k: int, members: list[np.ndarray] | None = None) -> float:
    """Share of top-K exposure that goes to the ``popular`` items (by default the top 20% by training frequency)."""
    mass = slot_mass(rankings[:, :k], len(popular), members)
    return float(mass[popular].sum() / mass.sum()) if mass.sum() else 0.0


def coverage(rankings: np.ndarray, n_items: int, k: int, members: list[np.ndarray] | None = None) -> float:
    """Catalogue coverage: the share of the ``n_items`` items that some top-K list shows (a SID shared by several
    items shows them all)."""
    return float((slot_mass(rankings[:, :k], n_items, members) > 0).mean()) if n_items else 0.0
