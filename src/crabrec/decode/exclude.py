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


def sid_paths(trie: SidTrie) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """``(sid_of_item, path, size)``: each item's SID; ``path[t][s]``, the node at depth ``t+1`` on SID ``s``'s path;
    ``size[t][n]``, how many SIDs pass through that node. Built once per trie and kept."""
    if "_paths" not in trie.__dict__:
        node = np.zeros(len(trie.sids), dtype=np.int64)
        path, size = [], []
        for t, child in enumerate(trie.child):
            node = child.numpy()[node, trie.sids[:, t]]
            path.append(node)
            size.append(np.bincount(node, minlength=int(child.max()) + 1))
        trie.__dict__["_paths"] = (trie.item_sid, path, size)
    return trie.__dict__["_paths"]


def excluded_nodes(trie: SidTrie, seen: np.ndarray, device: torch.device) -> list[torch.Tensor] | None:
    """Per level ``t``: ``[rows, width]`` node ids at depth ``t+1`` that row may not enter (padded with -2, which
    matches no node); ``seen [rows, S]`` holds item indices, -1 padded. None when no row excludes anything."""
    sid_of_item, path, size = sid_paths(trie)
    rows = []
    for row in seen:
        items = row[(row >= 0) & (row < len(sid_of_item))]
        sids = np.unique(sid_of_item[items])
        rows.append(sids[sids >= 0])
    if not any(len(r) for r in rows):
        return None
    out = []
    for t in range(trie.depth):
        full = []
        for sids in rows:
            nodes, counts = np.unique(path[t][sids], return_counts=True)
            full.append(nodes[counts == size[t][nodes]])
        table = np.full((len(rows), max(1, max(len(f) for f in full))), -2, dtype=np.int64)
        for r, f in enumerate(full):
            table[r, : len(f)] = f
        out.append(torch.from_numpy(table).to(device))
    return out


def entering(nxt: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """``[rows*beams, K]`` mask of the children ``nxt`` (nodes, grouped by row) that are excluded for their row."""
    rows = excluded.shape[0]
    grouped = nxt.view(rows, -1, 1)
    hit = torch.zeros(grouped.shape[:2], dtype=torch.bool, device=nxt.device)
    for j in range(excluded.shape[1]):  # a handful of nodes per row: no [rows, beams*K, width] intermediate
        hit |= grouped[..., 0] == excluded[:, j : j + 1]
    return hit.view_as(nxt)
