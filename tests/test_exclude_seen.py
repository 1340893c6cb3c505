"""Exclude-seen: a history's items never come back, the list keeps its k items (the exclusion is inside the beam
search), and the Python API, `crabrec recommend` and the HTTP service agree."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import crabrec
from crabrec.decode.beam import constrained_search
from crabrec.decode.exclude import NO_NODE, entering, excluded_nodes
from crabrec.decode.trie import SidTrie
from crabrec.sid.codebook import Codebook
from tests.test_recommend import RANKED, histories_of

LOG = math.log
# A, B under token 0; C, D under token 1; E alone under token 2
HAND = Codebook(
    codes=np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0]]), sizes=[3, 2], item_ids=["A", "B", "C", "D", "E"]
)


def hand_search(seen: list[list[int]], beam: int, unavailable: tuple[int, ...] = ()):
    """A fixed "model": P(first) = (0.5, 0.35, 0.15); after 0: A 0.6, B 0.4; after 1: C 0.9, D 0.1; after 2: E 1.
    So C 0.315, A 0.3, B 0.2, E 0.15, D 0.035. ``unavailable`` items' SIDs are taken out of the trie."""
    trie = SidTrie.build(HAND)
    if unavailable:
        trie = trie.without(trie.item_sid[list(unavailable)])
    rows = len(seen)
    first = torch.tensor([[LOG(0.5), LOG(0.35), LOG(0.15), -math.inf, -math.inf]] * rows)
    after = {0: [LOG(0.6), LOG(0.4)], 1: [LOG(0.9), LOG(0.1)], 2: [0.0, -math.inf]}

    def step(origin, token):
        return torch.tensor([[-math.inf] * 3 + after[int(t)] for t in token.reshape(-1)])

    width = max(1, max(map(len, seen)))
    table = np.array([s + [-1] * (width - len(s)) for s in seen])
    exclude = excluded_nodes(trie, table, torch.device("cpu"))
    sid, score = constrained_search(first, step, trie, beam, base=0, exclude=exclude)
    rep = trie.representative()
    return [[HAND.item_ids[rep[s]] for s in row if s >= 0] for row in sid.tolist()]


def test_excluded_nodes_by_hand():
    trie = SidTrie.build(HAND)
    nodes = excluded_nodes(trie, np.array([[0, 1, 2], [4, -1, -1]]), torch.device("cpu"))
    # row 0 saw A, B (all of token 0) and C: token 0's node and the leaves of A, B, C; row 1 saw E: token 2 and E
    assert nodes[0].tolist() == [[0], [2]]
    assert nodes[1].tolist() == [[0, 1, 2], [4, NO_NODE, NO_NODE]]
    assert excluded_nodes(trie, np.array([[-1, -1]]), torch.device("cpu")) is None


def test_entering_equals_a_per_row_membership_test():
    gen = torch.Generator().manual_seed(0)
    rows, beams, k, nodes = 6, 5, 40, 300
    nxt = torch.randint(-1, nodes, (rows * beams, k), generator=gen)
    excluded = torch.full((rows, 120), NO_NODE)
    for r, width in enumerate([0, 1, 3, 50, 119, 120]):  # empty rows, full rows, the first and last node
        picked = torch.randperm(nodes, generator=gen)[:width].sort().values
        excluded[r, :width] = torch.cat([torch.tensor([0, nodes - 1]), picked]).unique()[:width] if width else picked
    expected = torch.stack([torch.isin(nxt[i], excluded[i // beams]) for i in range(rows * beams)])
    assert expected.any() and torch.equal(entering(nxt, excluded), expected)


@pytest.mark.parametrize(
    "seen,beam,expected",
    [
        ([], 5, ["C", "A", "B", "E", "D"]),
        ([0], 5, ["C", "B", "E", "D"]),
        ([0, 1], 2, ["C", "E"]),  # token 0 is spent: the beam does not waste a slot on it (else C, D)
        ([2, 3, 4], 2, ["A", "B"]),
    ],
)
def test_search_skips_seen_items_and_keeps_the_list_full(seen, beam, expected):
    assert hand_search([seen], beam)[0] == expected


def test_rows_of_a_batch_exclude_their_own_items():
    assert hand_search([[0], [], [2, 3]], 3) == [["C", "B", "E"], ["C", "A", "B"], ["A", "B", "E"]]


@pytest.mark.parametrize("method", RANKED)
def test_api_never_returns_history_items_and_keeps_k(tiny_run, method):
    histories, users, _ = histories_of(tiny_run, 40)
    rec = crabrec.load(tiny_run, method)
    k = 10
    got = rec.recommend_batch(histories, k, users=users)
    for history, recs in zip(histories, got):
        assert len(recs) == k
        assert not {r.item for r in recs} & set(history)
        assert [r.rank for r in recs] == list(range(1, k + 1))
    kept = rec.recommend_batch(histories, k, users=users, exclude_seen=False)
    assert any({r.item for r in recs} & set(h) for h, recs in zip(histories, kept)) or method == "random"


def test_exclusion_reads_the_whole_history_not_only_the_model_window(tiny_run):
    rec = crabrec.load(tiny_run, "mor")
    history = histories_of(tiny_run, 1)[0][0]
    first = [r.item for r in rec.recommend(history, 5, exclude_seen=False)]
    longer = first + history  # the model reads the last max_history items; the first ones are still seen
    assert not {r.item for r in rec.recommend(longer, 10)} & set(longer)


def test_exclusion_is_the_same_alone_and_in_a_batch(tiny_run):
    rec = crabrec.load(tiny_run, "tiger")
    histories, users, _ = histories_of(tiny_run, 8)
    batch = rec.recommend_batch(histories, 10, users=users)
    alone = [rec.recommend(h, 10, user=u) for h, u in zip(histories, users)]
    assert [[r.item for r in x] for x in batch] == [[r.item for r in x] for x in alone]


def test_ragged_rows_read_as_the_padded_array():
    """The seen items of a batch of histories are held flat: reading rows gives them padded to the longest of them,
    as a padded array of all the rows would give them (cut to that width)."""
    from crabrec.data.dataset import Ragged

    rows = [[3, 1], [], [5, 6, 7, 8], [2]]
    seen = Ragged(rows)
    assert np.array_equal(seen[:], [[3, 1, -1, -1], [-1, -1, -1, -1], [5, 6, 7, 8], [2, -1, -1, -1]])
    assert np.array_equal(seen[np.array([3, 0])], [[2, -1], [3, 1]])
    assert np.array_equal(seen[1:2], [[-1]]) and np.array_equal(seen[np.array([False, True, False, True])], [[-1], [2]])
    assert seen[2].tolist() == [5, 6, 7, 8] and seen[-1].tolist() == [2] and len(seen) == 4
    assert [r.tolist() for r in seen] == rows and Ragged([])[np.arange(0)].shape == (0, 1)


def test_a_batch_with_a_long_history_excludes_as_each_history_alone(tiny_run):
    """A batch whose one history is 50 times longer than the others' ranks every row as that row alone: the seen
    items are padded per batch of rows, not to the longest history of all."""
    rec = crabrec.load(tiny_run, "mor")
    histories, users, _ = histories_of(tiny_run, 6)
    histories[2] = histories[2] * 50
    rows = rec.samples(histories, users)
    assert len(rows.seen.flat) == sum(map(len, histories))
    batch = rec.recommend_batch(histories, 10, users=users)
    alone = [rec.recommend(h, 10, user=u) for h, u in zip(histories, users)]
    assert [[r.item for r in x] for x in batch] == [[r.item for r in x] for x in alone]


@pytest.mark.parametrize(
    "unavailable,seen,beam,expected",
    [
        ((0,), [], 5, ["C", "B", "E", "D"]),
        ((0,), [1], 2, ["C", "E"]),  # A out and B seen: token 0 is spent, no slot wasted on it
        ((0, 1), [], 5, ["C", "E", "D"]),
        ((2, 3, 4), [0], 5, ["B"]),
    ],
)
def test_a_trie_without_some_sids_never_returns_them(unavailable, seen, beam, expected):
    assert hand_search([seen], beam, unavailable)[0] == expected


def test_a_node_whose_every_sid_is_out_is_no_child():
    trie = SidTrie.build(HAND)
    out = trie.without(trie.item_sid[[0, 1, 2]])  # A, B (all of token 0) and C
    assert out.child[0].tolist() == [[-1, 1, 2]] and out.child[1].tolist()[1] == [-1, 3]
    assert out.paths()[1][0].tolist() == [0, 1, 1] and trie.paths()[1][0].tolist() == [2, 2, 1]
    assert trie.child[0].tolist() == [[0, 1, 2]]  # the trie it came from is unchanged
