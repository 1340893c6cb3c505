"""Items added to a trained run without retraining (``new_items``): SIDs by the run's own quantizer (known answers:
the catalogue's own items get back theirs), a full SID's item moved to the nearest token with room, CRAB's split
followed, and every method over semantic IDs ranking them through the API, the CLI and the service."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import crabrec
from crabrec.errors import CrabError
from crabrec.new_items import NewItems, base_codes, read, rebalanced_codes, semantic_codes
from crabrec.runfiles import RunFiles
from crabrec.sid.codebook import Codebook
from tests.conftest import cli
from tests.test_serve import call, post, serving


@pytest.fixture(scope="module")
def new_file(tiny_run, tmp_path_factory) -> Path:
    """Twelve Office items the tiny run never saw, one it holds, and a copy of one of its items under a new id."""
    from crabrec.data.loaders import embedded_path

    items = json.loads((embedded_path() / "Office.item.json").read_text())
    known = RunFiles(tiny_run).load_items()["item_ids"]
    unseen = [k for k in items if k not in set(known)][:12]
    rows = [{"item_id": k, **items[k]} for k in unseen]
    rows += [{"item_id": known[0], "title": "already there"}, {"item_id": "copy-1", **items[known[1]]}]
    path = tmp_path_factory.mktemp("new") / "new_items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def added(tiny_run, new_file) -> NewItems:
    return read(tiny_run, new_file, progress=False)


def test_the_catalogues_own_items_get_back_their_sids(tiny_run):
    files = RunFiles(tiny_run)
    base, crab = files.load_codebook(), files.load_codebook(rebalanced=True)
    vectors = np.load(files.embeddings)
    assert np.array_equal(semantic_codes(base, vectors)[0], base.codes[:, : base.semantic_levels])
    own = NewItems("catalogue", list(base.item_ids), [{}] * base.n_items, vectors, base.codes.copy())
    codes = rebalanced_codes(base, crab, own)
    last = base.semantic_levels - 1
    # above the last level an item's part is its child token's: the split itself; at the last level (items split
    # one by one, with a balance term) the nearest part, always one of its own token's parts
    assert np.array_equal(np.delete(codes, last, 1), np.delete(crab.codes, last, 1))
    assert not np.array_equal(base.codes[:, last], crab.codes[:, last])  # the tiny run splits at that level
    parts = {(int(b), int(c)) for b, c in zip(base.codes[:, last], crab.codes[:, last])}
    assert all((int(b), int(c)) in parts for b, c in zip(base.codes[:, last], codes[:, last]))
    assert (codes[:, last] == crab.codes[:, last]).mean() > 0.9


def small_codebook(dedup: bool) -> Codebook:
    """Two levels (+ dedup): level 0 codewords at x=0 and x=10, level 1 at x=0, 1, 3; SID (0, 0) holds two items
    (one without the dedup level)."""
    codes = [[0, 0, 0], [0, 0, 1], [1, 0, 0]] if dedup else [[0, 0], [1, 2]]
    words = [np.array([[0.0, 0], [10, 0]], np.float32), np.array([[0.0, 0], [1, 0], [3, 0]], np.float32)]
    return Codebook(
        codes=np.array(codes), sizes=[2, 3, 2] if dedup else [2, 3], item_ids=[f"i{n}" for n in range(len(codes))],
        dedup_levels=int(dedup), codewords=words + ([np.zeros((2, 2), np.float32)] if dedup else []),
    )  # fmt: skip


def test_a_full_sid_sends_a_new_item_to_the_nearest_token_with_room():
    near = np.array([[0.1, 0.0]] * 6, np.float32)  # nearest SID (0, 0); then (0, 1), then (0, 2)
    codes, kept = base_codes(small_codebook(dedup=True), near)
    # (0, 0) holds two items, as many as the dedup level tells apart: the next take (0, 1) and (0, 2), two each
    assert codes[kept].tolist() == [[0, 1, 0], [0, 1, 1], [0, 2, 0], [0, 2, 1]]
    assert kept.tolist() == [True] * 4 + [False] * 2  # then every SID under token 0 is full: left out
    codes, kept = base_codes(small_codebook(dedup=False), near[:3])
    # without a dedup level a SID holds one item: (0, 0) is item 0's; (0, 1) and (0, 2) take one new item each
    assert codes.tolist()[:2] == [[0, 1], [0, 2]] and kept.tolist() == [True, True, False]


def test_new_items_are_read_once_and_reproducibly(tiny_run, new_file, added, caplog):
    known = RunFiles(tiny_run).load_items()["item_ids"]
    assert len(added) == 13 and known[0] not in added.ids and "copy-1" in added.ids
    again = read(tiny_run, new_file, progress=False)
    assert again.ids == added.ids and np.array_equal(again.codes, added.codes)
    # the copy's text is its original's: the same tokens, and the dedup level tells them apart
    base = RunFiles(tiny_run).load_codebook()
    copy = added.codes[added.ids.index("copy-1")]
    semantic = base.semantic_levels
    free = base.codes[:, :semantic].tolist().count(base.codes[1, :semantic].tolist()) < base.sizes[-1]
    if free:
        assert copy[:semantic].tolist() == base.codes[1, :semantic].tolist()
    full = {tuple(r) for r in base.codes.tolist()}
    assert not any(tuple(r) in full for r in added.codes.tolist())  # no new item shares a SID


def test_a_dataframe_of_new_items_is_the_same_table_in_a_file(tiny_run, new_file, added):
    """The file's rows as a pandas DataFrame (and as a pyarrow Table) give the same items, SIDs and lists."""
    import pandas as pd
    import pyarrow as pa

    frame = pd.read_json(new_file, lines=True, dtype=False)
    for table in (frame, pa.Table.from_pandas(frame)):
        again = read(tiny_run, table, progress=False)
        assert again.ids == added.ids and np.array_equal(again.codes, added.codes)
        assert np.array_equal(again.vectors, added.vectors)
    history = RunFiles(tiny_run).load_items()["item_ids"][:3]
    assert crabrec.load(tiny_run, new_items=frame).recommend(history) == crabrec.load(
        tiny_run, new_items=new_file
    ).recommend(history)
    with pytest.raises(CrabError, match="new_items: expected the path of an item table, a pandas DataFrame, a"):
        crabrec.load(tiny_run, new_items=frame.to_dict())


@pytest.mark.parametrize("method", ["mor", "tiger", "crab", "ppd", "rr"])
def test_every_method_over_sids_ranks_the_new_items(tiny_run, added, method):
    rec = crabrec.load(tiny_run, method, new_items=added, beam=1000)
    plain = crabrec.load(tiny_run, method, beam=1000)
    assert rec.item_ids == [*plain.item_ids, *added.ids]
    assert rec.max_k == plain.max_k + len(added)  # every new item has a SID of its own
    ranked = [r.item for r in rec.recommend(plain.item_ids[:3], rec.max_k, exclude_seen=False)]
    assert sorted(ranked) == sorted(rec.item_ids)  # an exhaustive beam reaches every item, the new ones included
    cards = {r.item: r for r in rec.recommend(plain.item_ids[:3], rec.max_k)}
    assert all(cards[i].group == 0 and not cards[i].popular for i in added.ids)
    after_new = rec.recommend([added.ids[0], plain.item_ids[5]], 10)  # a history may hold new items too
    assert added.ids[0] not in [r.item for r in after_new]


def test_methods_over_item_ids_and_runs_without_text_refuse(tiny_run, ids_run, new_file):
    with pytest.raises(CrabError, match="ranks only the items it was trained on"):
        crabrec.load(tiny_run, "sasrec", new_items=new_file)
    with pytest.raises(CrabError, match="its items have no text"):
        crabrec.load(ids_run, "mor", new_items=new_file)
    with pytest.raises(CrabError, match="expected the path of an item table"):
        crabrec.load(tiny_run, "mor", new_items=[1, 2])


def test_cli_recommend_with_new_items(tiny_run, new_file, added, tmp_path, capsys):
    history = f"{added.ids[0]},{added.ids[1]}"
    code, _ = cli(["recommend", str(tiny_run), "--history", history, "--new-items", str(new_file), "-k", "5"])
    assert code == 0
    assert len(capsys.readouterr().out.splitlines()) == 6
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    code, _ = cli(["recommend", str(tiny_run), "--history", "0", "--new-items", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "bad.csv: no item id column" in err and "Traceback" not in err


def test_the_service_serves_new_items(tiny_run, new_file, added):
    from crabrec.serve import build_app

    app = build_app(tiny_run, ["mor", "tiger"], new_items=new_file, max_wait_ms=1)
    with serving(app) as base:
        for method in ("mor", "tiger"):
            code, body = post(base, {"history": added.ids[:2], "k": 5, "method": method})
            assert code == 200 and len(body["items"]) == 5
        code, body = call(f"{base}/models")
    sizes = {m["method"]: m.get("items") for m in body["models"]}
    catalogue = len(RunFiles(tiny_run).load_items()["item_ids"])
    assert code == 200 and sizes["mor"] == sizes["tiger"] == catalogue + len(added) and sizes["rr"] is None


def test_a_table_of_items_the_run_holds_adds_nothing(tiny_run, tmp_path):
    known = RunFiles(tiny_run).load_items()["item_ids"][:3]
    path = tmp_path / "items.csv"
    path.write_text("item_id,title\n" + "".join(f"{i},again\n" for i in known))
    for method in ("mor", "crab"):
        rec = crabrec.load(tiny_run, method, new_items=path)
        assert len(rec.item_ids) == len(crabrec.load(tiny_run, method).item_ids)


def test_new_items_take_capped_slots_after_the_sids_they_share_tokens_with():
    from types import SimpleNamespace

    from crabrec.data.dataset import Samples
    from crabrec.new_items import NewItemSlots

    # items 0-4 in the catalogue, 5 and 6 new; 5 shares item 2's first two tokens, 6 item 0's
    sids = np.array([[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0], [2, 0, 0], [1, 0, 1], [0, 0, 1]])
    beam = (np.array([[2, 0, 1, 3, 4]]), np.array([[-1.0, -2, -3, -4, -5]]))
    base = SimpleNamespace(trie=SimpleNamespace(sids=sids, item_sid=np.arange(7)), width=5, block=8,
                           rank=lambda rows, desc, progress: beam)  # fmt: skip

    def ranked(share: float, seen: list[int]) -> tuple[list[int], list[float]]:
        rows = Samples.from_rows([0], [[1]], [0], 4, seen=[seen])
        items, scores = NewItemSlots(base, 5, share, depth=2).rank(rows)
        return items[0].tolist(), scores[0].tolist()

    # at most round(0.2 k) of every top-k: none in the top 2, one from the third slot on; scored as the SID it
    # follows (item 2's -1), never above the slot before it (-2); item 4 no longer fits the list
    assert ranked(0.2, []) == ([2, 0, 5, 1, 3], [-1, -2, -2, -3, -4])
    assert ranked(0.2, [5]) == ([2, 0, 6, 1, 3], [-1, -2, -2, -3, -4])  # an item of the history is not placed
    assert ranked(0.0, []) == ([2, 0, 1, 3, 4], [-1, -2, -3, -4, -5])  # share 0: the search's list as it is
    assert ranked(1.0, [])[0] == [2, 5, 0, 6, 1]  # share 1: each right after the SID it shares tokens with


def test_of_the_new_items_sharing_a_token_those_sharing_more_come_first():
    from types import SimpleNamespace

    from crabrec.new_items import NewItemSlots

    # the search's item 0 has SID (0, 1, 2); new items 1-3 share its first token, item 3 its first two, item 2 all
    sids = np.array([[0, 1, 2], [0, 0, 0], [0, 1, 2], [0, 1, 0], [1, 1, 2]])
    base = SimpleNamespace(trie=SimpleNamespace(sids=sids, item_sid=np.arange(5)), width=5, block=8)
    slots = NewItemSlots(base, 1, 1.0)
    assert slots.matching(0) == [2, 3, 1]  # item 4 shares no first token
    assert [item for item, _ in slots.placed([0], [-1.0], ())] == [0, 2, 3, 1]


def test_new_share_goes_with_new_items_and_is_a_share(tiny_run, added):
    with pytest.raises(CrabError, match=r"new_share \(--new-share\) goes with new_items"):
        crabrec.load(tiny_run, "mor", new_share=0.2)
    with pytest.raises(CrabError, match="expected a share from 0 to 1"):
        crabrec.load(tiny_run, "mor", new_items=added, new_share=1.5)


def test_a_tables_encoding_is_kept_and_read_back_bit_for_bit(tiny_run, new_file, added, tmp_path, monkeypatch):
    import crabrec.embed
    import crabrec.io
    import crabrec.new_items as new_items

    again = read(tiny_run, new_file, progress=False)  # `added` made the run keep the table's encoding
    assert np.array_equal(again.vectors, added.vectors) and np.array_equal(again.codes, added.codes)

    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded again")

    monkeypatch.setattr(crabrec.embed, "encode", no_encoding)
    read(tiny_run, new_file, progress=False)  # read back: no encoding
    cache = RunFiles(tiny_run).new_items_cache
    for n in range(new_items.CACHE_KEEP + 1):  # other tables: encoded, and only the last few kept
        monkeypatch.undo()
        path = tmp_path / f"t{n}.csv"
        path.write_text(f"item_id,title\nfresh-{n},a table of its own {n}\n")
        read(tiny_run, path, progress=False)
    assert len(list(cache.glob("*.npy"))) == new_items.CACHE_KEEP

    def cannot_write(*args, **kwargs):
        raise CrabError("read-only")

    monkeypatch.setattr(crabrec.io, "write_npy", cannot_write)  # a run folder mounted read-only still loads
    path = tmp_path / "ro.csv"
    path.write_text("item_id,title\nfresh-ro,read only\n")
    assert read(tiny_run, path, progress=False).ids == ["fresh-ro"]
