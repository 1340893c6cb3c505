"""Items a search must not return (a user's own history), as trie nodes the constrained beam search masks.

A node is excluded for a row when every SID below it belongs to an excluded item, so the beams never spend a slot
on a prefix that can only end in a seen item, and a leaf (one SID) is excluded when its item is. The list therefore
keeps its full length whenever the catalogue has enough other items. Where several items share a SID (no
deduplication level), the SID is excluded when any of its items is.
"""

from __future__ import annotations

import numpy as np
import torch

from crabrec.decode.trie import SidTrie

NO_NODE = np.iinfo(np.int64).max  # pads a row's nodes: matches no node, and keeps the row sorted


def excluded_nodes(trie: SidTrie, seen: np.ndarray, device: torch.device) -> list[torch.Tensor] | None:
    """Per level ``t``: ``[rows, width]`` node ids at depth ``t+1`` that row may not enter, ascending (padded with
    ``NO_NODE``); ``seen [rows, S]`` holds item indices, -1 padded. None when no row excludes anything."""
    sid_of_item, (path, size) = trie.item_sid, trie.paths()
    rows = []
    for row in seen:
        items = row[(row >= 0) & (row < len(sid_of_item))]
        sids = np.unique(sid_of_item[items])
        sids = sids[sids >= 0]
        rows.append(sids if trie.available is None else sids[trie.available[sids]])  # out of reach already
    if not any(len(r) for r in rows):
        return None
    out = []
    for t in range(trie.depth):
        full = []
        for sids in rows:
            nodes, counts = np.unique(path[t][sids], return_counts=True)
            full.append(nodes[counts == size[t][nodes]])  # np.unique's order: ascending
        table = np.full((len(rows), max(1, max(len(f) for f in full))), NO_NODE, dtype=np.int64)
        for r, f in enumerate(full):
            table[r, : len(f)] = f
        out.append(torch.from_numpy(table).to(device))
    return out


def entering(nxt: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """``[rows*beams, K]`` mask of the children ``nxt`` (nodes, grouped by row) that are excluded for their row
    (``excluded``: :func:`excluded_nodes`' ascending rows). A binary search per child: a row may exclude thousands
    of nodes (unavailable items), and no ``[rows, beams*K, width]`` comparison is built."""
    grouped = nxt.reshape(excluded.shape[0], -1)
    at = torch.searchsorted(excluded, grouped).clamp_(max=excluded.shape[1] - 1)
    return (excluded.gather(1, at) == grouped).view_as(nxt)
