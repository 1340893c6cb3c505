"""`crabrec serve`: real HTTP requests to a server on a free loopback port; dynamic batching; 4xx, never 500."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import crabrec
from crabrec.data.dataset import Samples
from crabrec.errors import CrabError
from crabrec.runfiles import RunFiles
from crabrec.serve.batcher import DynamicBatcher
from tests.test_cli_bad_input import run_cli
from tests.test_recommend import histories_of


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tiny_run):
    """``crabrec serve`` of the tiny run (mor and rr, batches of up to 64 gathered for 20 ms) on a free port."""
    from crabrec.serve import build_app
    from crabrec.serve.app import Limits

    app = build_app(tiny_run, ["mor", "rr"], max_batch=64, max_wait_ms=20, limits=Limits(max_body=20_000))
    with serving(app) as base:
        yield base, app


@contextlib.contextmanager
def serving(app):
    """``app`` served by uvicorn on a free loopback port, in a thread, until the block ends; yields its base URL."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    end = time.time() + 30
    while not srv.started and time.time() < end:
        time.sleep(0.05)
    assert srv.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def call(url: str, body: bytes | None = None, method: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"))
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def post(base: str, payload) -> tuple[int, dict]:
    return call(f"{base}/recommend", json.dumps(payload).encode())


def items(answer: list[dict]) -> list[str]:
    return [r["item"] for r in answer]


def test_health_models_and_docs(server, tiny_run):
    base, _ = server
    assert call(f"{base}/health") == (200, {"status": "ok", "run": str(tiny_run), "methods": ["mor", "rr"]})
    code, models = call(f"{base}/models")
    assert code == 200 and models["default"] == "mor"
    table = {m["method"]: m for m in models["models"]}
    assert table["rr"]["served"] and not table["crab"]["served"]
    mor = json.loads((tiny_run / "models" / "mor" / "metrics.json").read_text())
    assert table["mor"]["metrics"]["HR@10"] == mor["HR@10"] and table["mor"]["max_k"] == 20
    with urllib.request.urlopen(f"{base}/docs", timeout=10) as resp:
        page = resp.read().decode()
        assert resp.status == 200 and "POST" in page and "/recommend" in page and "exclude_seen" in page
    assert "One history (<code>history</code>) or several (<code>histories</code>)" in page  # which fields go together
    assert "<script" not in page and "https://" not in page and "cdn" not in page.lower()  # works offline
    code, spec = call(f"{base}/openapi.json")
    assert (
        "history"
        in spec["paths"]["/recommend"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    )


def test_recommend_equals_the_api(server, tiny_run):
    base, _ = server
    histories, users, _ = histories_of(tiny_run, 6)
    for method in ("mor", "rr"):
        rec = crabrec.load(tiny_run, method)
        code, one = post(base, {"history": histories[0], "k": 7, "method": method, "user": users[0]})
        assert code == 200 and one["method"] == method and one["k"] == 7
        assert one["items"] == [r.as_dict() for r in rec.recommend(histories[0], k=7, user=users[0])]
        code, many = post(base, {"histories": histories, "k": 5, "method": method})
        assert code == 200
        assert [items(a) for a in many["results"]] == [items(r.as_dict() for r in x) for x in
                                                      rec.recommend_batch(histories, k=5)]  # fmt: skip


def test_a_method_is_named_as_table_1_writes_it_in_any_case(server, tiny_run, capsys):
    """``--method MOR`` or ``D²LR`` (the report's spelling) was `expected one of mor, ...`; the API, the CLI and a
    request take any case and the label's spelling, and answer with the method's name."""
    from crabrec.methods import get, named

    assert [named(n) for n in ("MOR", "d²lr", "D2LR", "TIGER+CRAB", "tiger_ppd_rr", "MostPop", " Rr ")] == [
        "mor", "d2lr", "d2lr", "tiger-crab", "tiger-ppd-rr", "pop", "rr"
    ]  # fmt: skip
    assert named("nope") is None and named(3) is None and get("CRAB").name == "crab"
    with pytest.raises(CrabError, match="--method 'MOR2': expected one of mor,"):
        get("MOR2")
    base, _ = server
    histories, _, _ = histories_of(tiny_run, 1)
    code, answer = post(base, {"history": histories[0], "k": 3, "method": "RR"})
    assert code == 200 and answer["method"] == "rr"
    rec = crabrec.load(tiny_run, "MOR")
    assert rec.method == "mor" and items(answer["items"]) == items(
        r.as_dict() for r in crabrec.load(tiny_run, "rr").recommend(histories[0], k=3)
    )
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "RR", "--history", ",".join(histories[0])], capsys)
    assert code == 0 and not err


@pytest.mark.parametrize("exclude", [True, False])
def test_exclude_seen_api_equals_cli_equals_http(server, tiny_run, tmp_path, capsys, exclude):
    """The same histories through the Python API, `crabrec recommend --input` and POST /recommend: the same lists;
    with exclusion (the default everywhere) no list holds an item of its history."""
    from tests.test_recommend import run_cli

    base, _ = server
    histories, users, _ = histories_of(tiny_run, 12)
    api = [[r.item for r in recs] for recs in crabrec.load(tiny_run, "mor").recommend_batch(
        histories, k=10, users=users, exclude_seen=exclude)]  # fmt: skip
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"history": h, "user": u}) + "\n" for h, u in zip(histories, users)))
    flag = "--exclude-seen" if exclude else "--include-seen"
    code, _, err = run_cli(["recommend", str(tiny_run), "--input", str(src), "--output", str(out), flag], capsys)
    assert code == 0, err
    cli_lists = [json.loads(line)["items"] for line in out.read_text().splitlines()]
    body = {"histories": histories, "users": users, "k": 10} | ({} if exclude else {"exclude_seen": False})
    code, answer = post(base, body)
    assert code == 200
    http = [items(a) for a in answer["results"]]
    assert api == cli_lists == http
    assert all(len(x) == 10 for x in api)
    if exclude:
        assert not any(set(x) & set(h) for x, h in zip(api, histories))


def test_users_by_their_data_id_equal_the_api(server, tiny_run):
    base, _ = server
    rec = crabrec.load(tiny_run, "mor")
    ids = RunFiles(tiny_run).load_users().ids[:4]
    code, one = post(base, {"user_id": ids[0], "k": 5})
    assert code == 200 and one["items"] == [r.as_dict() for r in rec.recommend(user_id=ids[0], k=5)]
    own = [rec.item_ids[0]]
    code, many = post(base, {"user_ids": ids, "histories": [None, own, None, None], "k": 5})
    expected = rec.recommend_batch([None, own, None, None], k=5, user_ids=ids)
    assert code == 200 and [items(a) for a in many["results"]] == [[r.item for r in x] for x in expected]


def test_concurrent_requests_are_batched(server, tiny_run):
    base, app = server
    histories, _, _ = histories_of(tiny_run, 24)
    rec = crabrec.load(tiny_run, "mor")
    expected = [items(r.as_dict() for r in x) for x in rec.recommend_batch(histories, k=10)]
    before = dict(app.state.batchers["mor"].stats)
    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(lambda h: post(base, {"history": h}), histories))
    assert all(code == 200 for code, _ in answers)
    assert [items(a["items"]) for _, a in answers] == expected
    after = app.state.batchers["mor"].stats
    assert after["histories"] - before["histories"] == 24
    assert after["calls"] - before["calls"] < 24 and after["largest"] > 1  # gathered into fewer ranker calls


def bad_requests(item: str) -> list[tuple[bytes, int, str]]:
    deep = b"[" * 5000
    return [
        (b"{bad", 400, "malformed JSON"),
        (b"", 400, "empty body"),
        (b"NaN", 400, "malformed JSON: NaN is not a JSON value"),
        (b"\xff\xfe\x00", 400, "malformed JSON"),
        (deep, 400, "malformed JSON"),
        (b"[1, 2]", 422, "expected a JSON object, got list"),
        (b'"text"', 422, "expected a JSON object, got str"),
        (b"{}", 422, "give `history` (one list of item ids) or `user_id`"),
        (json.dumps({"history": [item], "histories": [[item]]}).encode(), 422, "give `history`"),
        (json.dumps({"user_id": "no such user"}).encode(), 422, "user_id 'no such user': not a user of this run"),
        (json.dumps({"user_id": "x", "histories": [[item]]}).encode(), 422, "give `history`"),
        (json.dumps({"histories": [[item], None]}).encode(), 422, "history 1: missing"),
        (json.dumps({"history": []}).encode(), 422, "history: empty"),
        (json.dumps({"history": ["no-such-item"]}).encode(), 422, "'no-such-item'"),
        (json.dumps({"history": ["no-such-item"], "drop_unknown": True}).encode(), 422, "after dropping unknown"),
        (json.dumps({"history": [item], "k": 0}).encode(), 422, "k=0: expected an integer from 1 to 20"),
        (json.dumps({"history": [item], "k": 21}).encode(), 422, "k=21"),
        (b'{"history": ["%s"], "k": 1e400}' % item.encode(), 422, "k: "),
        (json.dumps({"history": [item], "k": float("inf")}).encode(), 400, "Infinity is not a JSON value"),
        (json.dumps({"history": [item], "k": "10"}).encode(), 422, "k: "),
        (json.dumps({"history": [None]}).encode(), 422, "history.0: expected an item id"),
        (json.dumps({"history": item}).encode(), 422, "history: "),
        (json.dumps({"histories": [[item], "x"]}).encode(), 422, "histories.1: "),
        (json.dumps({"history": [item], "method": "crab"}).encode(), 422, "method 'crab': not served here"),
        (json.dumps({"history": [item], "extra": 1}).encode(), 422, "extra: "),
        (b'{"history": ["%s"], "k": 3, "history": []}' % item.encode(), 422, "duplicate key 'history'"),
        (json.dumps({"history": [item], "users": [1]}).encode(), 422, "`user` goes with `history`"),
        (json.dumps({"user": "u3"}).encode(), 422, "user: expected the run's user index, an integer; users of"),
        (json.dumps({"user": "u3"}).encode(), 422, "users of the data by their ids go in `user_id`"),
        (json.dumps({"histories": [[item]], "users": ["u3"]}).encode(), 422, "users.0: expected the run's user index"),
        (json.dumps({"histories": [[item]] * 2, "users": [1]}).encode(), 422, "users: expected one per history"),
        (json.dumps({"history": [item], "user": -1}).encode(), 422, "expected a user index"),
        (json.dumps({"history": [item], "user": 10**30}).encode(), 422, "expected a user index"),  # past int64
        (json.dumps({"histories": [[item]], "users": [2**63]}).encode(), 422, "expected a user index"),
        (json.dumps({"history": [10**30]}).encode(), 422, "not in this run's catalogue"),
        (json.dumps({"histories": [[item]] * 1025}).encode(), 413, "at most 1024 per request"),
        (json.dumps({"history": [item] * 10_000}).encode(), 413, "at most 20000 bytes"),
    ]


def test_bad_requests_get_a_4xx_with_one_line(server, tiny_run):
    base, _ = server
    item = crabrec.load(tiny_run, "mor").item_ids[0]
    for body, status, reason in bad_requests(item):
        code, answer = call(f"{base}/recommend", body)
        assert code == status, (body[:60], code, answer)
        assert reason in answer["error"] and "\n" not in answer["error"], (body[:60], answer)
    assert call(f"{base}/nowhere")[0] == 404
    assert call(f"{base}/recommend", method="GET")[0] == 405
    for path, method, allowed in (("recommend", "GET", "POST"), ("health", "DELETE", "GET")):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"{base}/{path}", method=method), timeout=30)
        assert refused.value.code == 405 and refused.value.headers["Allow"] == allowed  # RFC 9110: 405 says Allow
    assert post(base, {"history": [item]})[0] == 200  # the server is still fine


def _schema_accepts(schema: dict, value) -> bool:
    """The JSON Schema keywords the request's combination rules use (enough for them, not a general validator)."""
    if "not" in schema and _schema_accepts(schema["not"], value):
        return False
    if "required" in schema and not all(n in value for n in schema["required"]):
        return False
    for name, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and name in value and not _schema_accepts(sub, value[name]):
            return False
    if schema.get("type") == "null" and value is not None:
        return False
    if isinstance(value, list) and len(value) < schema.get("minItems", 0):
        return False
    checks = [all(_schema_accepts(s, value) for s in schema.get("allOf", []))]
    if "anyOf" in schema:
        checks.append(any(_schema_accepts(s, value) for s in schema["anyOf"]))
    if "oneOf" in schema:
        checks.append(sum(_schema_accepts(s, value) for s in schema["oneOf"]) == 1)
    return all(checks)


def test_the_published_schema_states_which_fields_go_together(server, tiny_run):
    """/openapi.json's request schema says what the endpoint checks beyond each field's type (one history or user, or
    several; users by index or by id; a history is not empty), so that clients and schema tools agree with it: a
    request the schema rejects by these rules is a 422, and the good requests pass both."""
    base, _ = server
    item = crabrec.load(tiny_run, "mor").item_ids[0]
    user = str(RunFiles(tiny_run).load_users().ids[0])
    request = call(f"{base}/openapi.json")[1]["paths"]["/recommend"]["post"]["requestBody"]
    schema = request["content"]["application/json"]["schema"]
    rules = {key: schema[key] for key in ("oneOf", "not")} | {"properties": {"history": {"minItems": 1}}}
    refused = [{}, {"history": None}, {"history": []}, {"history": [item], "histories": [[item]]},
               {"history": [item], "user_ids": [user]}, {"histories": [[item]], "user": 0},
               {"history": [item], "users": [0]}, {"user_id": user, "user": 0}, {"user_ids": [user], "users": [0]},
               {"history": [item], "user_id": user, "histories": None, "user_ids": []}]  # fmt: skip
    accepted = [{"history": [item]}, {"user_id": user}, {"history": [item], "user": 0}, {"histories": [[item]]},
                {"user_ids": [user]}, {"histories": [[item], None], "user_ids": [user, user]}, {"histories": []},
                {"history": [item], "histories": None, "user": None, "users": None, "k": 5}]  # fmt: skip
    for body in refused:
        assert not _schema_accepts(rules, body), body
        assert post(base, body)[0] == 422, body
    for body in accepted:
        assert _schema_accepts(rules, body), body
        assert post(base, body)[0] == 200, (body, post(base, body))
    assert schema["properties"]["k"]["minimum"] == 1 and post(base, {"history": [item], "k": 0})[0] == 422


def test_batcher_splits_results_and_passes_errors():
    calls = []

    def rank(rows: Samples):
        calls.append(len(rows))
        if (rows.user < 0).any():
            raise ValueError("boom")
        return rows.user[:, None] * np.ones((1, 3), np.int64), np.zeros((len(rows), 3), np.float32)

    def rows(users: list[int]) -> Samples:
        return Samples.from_rows(users, [[1]] * len(users), [0] * len(users), 2)

    async def scenario():
        batcher = DynamicBatcher(rank, max_batch=8, max_wait_ms=50)
        outs = await asyncio.gather(*(batcher.submit(rows([u, u + 100])) for u in range(4)))
        with pytest.raises(ValueError, match="boom"):
            await batcher.submit(rows([-1]))
        await batcher.stop()
        return outs

    outs = asyncio.run(scenario())
    assert [o[0][:, 0].tolist() for o in outs] == [[u, u + 100] for u in range(4)]
    assert calls[0] == 8 and len(calls) == 2


def test_a_batcher_answers_on_each_event_loop_it_is_called_from():
    """A test client used without its lifespan (``TestClient(app)`` outside ``with``) runs each request on an event
    loop of its own: the second request waited forever on the first loop's worker."""
    batcher = DynamicBatcher(lambda r: (r.user[:, None], np.zeros((len(r), 1), np.float32)), max_wait_ms=1)
    rows = Samples.from_rows([7], [[1]], [0], 2)
    for _ in range(2):  # two loops, one after the other
        items, _ = asyncio.run(asyncio.wait_for(batcher.submit(rows), 10))
        assert items.tolist() == [[7]]
    asyncio.run(batcher.stop())


def test_batcher_does_not_wait_out_max_wait_when_nothing_more_is_coming():
    """A lone request after a lone request is ranked at once, however many histories it holds; under a steady
    load a batch closes as soon as as many requests are back as the previous call served."""
    calls = []

    def rank(rows: Samples):
        calls.append(len(rows))
        return np.zeros((len(rows), 3), np.int64), np.zeros((len(rows), 3), np.float32)

    def rows(n: int) -> Samples:
        return Samples.from_rows([0] * n, [[1]] * n, [0] * n, 2)

    async def timed(coro) -> float:
        start = time.perf_counter()
        await coro
        return time.perf_counter() - start

    async def scenario():
        batcher = DynamicBatcher(rank, max_batch=64, max_wait_ms=1000)
        await batcher.submit(rows(1))
        lone = [await timed(batcher.submit(rows(5))) for _ in range(2)]  # one request of 5 histories, twice
        first = await timed(asyncio.gather(*(batcher.submit(rows(1)) for _ in range(4))))
        again = await timed(asyncio.gather(*(batcher.submit(rows(1)) for _ in range(4))))
        await batcher.stop()
        return lone, first, again

    lone, first, again = asyncio.run(scenario())
    assert max(lone) < 0.5 and again < 0.5  # neither waited out the 1 s
    # load begins (several queued at once): the batch waits for more. The event loop may fire a timer up to its
    # clock resolution early, so the bound leaves a margin well above the 0.5 s of the runs that did not wait.
    assert first >= 0.9
    assert calls == [1, 5, 5, 4, 4]


def test_an_unusable_address_fails_before_loading(tiny_run, capsys):
    """A port in use and a host that is not this machine's: one line, exit 2, before any model is loaded."""
    from crabrec.cli import main
    from crabrec.serve import listen, url

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for args, expected in [
            (["--port", str(port)], f"--host 127.0.0.1 --port {port}: cannot listen there"),
            (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid': not an address"),
            (["--host", " "], "--host ' ': expected an address"),
        ]:
            with pytest.raises(SystemExit) as exit_:
                main(["serve", str(tiny_run), *args])
            err = capsys.readouterr().err
            assert exit_.value.code == 2 and expected in err and err.count("\n") == 1, err
    sock = listen("127.0.0.1", 0)  # port 0: a free port, and the URL names the one bound
    try:
        assert url(sock) == f"http://127.0.0.1:{sock.getsockname()[1]}" and sock.getsockname()[1] > 0
    finally:
        sock.close()
