"""The HTTP service: ``POST /recommend``, ``GET /health``, ``GET /models`` and the API's docs at ``/docs`` (served
without a CDN, see :mod:`.docs`). Every request gets one access-log line on the ``crabrec.access`` logger.

Every served method is a :class:`~crabrec.recommender.Recommender` behind its own
:class:`~crabrec.serve.batcher.DynamicBatcher`. The request body is read and checked here (size limit, JSON, schema,
catalogue), so every bad request gets a 4xx with a one-line ``{"error": ...}`` and never reaches the model.
"""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from crabrec.errors import CrabError, clip
from crabrec.io import DuplicateKeyError, loads_unique
from crabrec.methods import named
from crabrec.recommender import Recommendation, Recommender
from crabrec.serve.batcher import DynamicBatcher

ItemIds = list[StrictStr | StrictInt]
access = logging.getLogger("crabrec.access")


def _given(*names: str) -> dict[str, Any]:
    """JSON Schema: at least one of ``names`` is present and not null."""
    return {"anyOf": [{"required": [n], "properties": {n: {"not": {"type": "null"}}}} for n in names]}


# what the endpoint checks beyond each field's type, stated in the published schema for clients and schema tools
_REQUEST_RULES = {
    "oneOf": [  # one history or user, or several
        {"allOf": [_given("history", "user_id"), {"not": _given("histories", "user_ids", "users", "excludes")}]},
        {"allOf": [_given("histories", "user_ids"), {"not": _given("history", "user_id", "user")}]},
    ],
    "not": {  # users by index or by id, not both
        "anyOf": [{"allOf": [_given("user"), _given("user_id")]}, {"allOf": [_given("users"), _given("user_ids")]}]
    },
}


class RecommendRequest(BaseModel):
    """One history (``history``) or several (``histories``), oldest item first, in the dataset's item ids; or one
    user (``user_id``) or several (``user_ids``) of the run's data, whose known history is used when none is given."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_REQUEST_RULES)

    history: ItemIds | None = Field(
        None, description="one history; give this or `histories`", json_schema_extra={"minItems": 1}
    )
    histories: list[ItemIds | None] | None = Field(None, description="several histories, ranked together")
    k: StrictInt = Field(10, description="list length, 1 to the method's beam width", json_schema_extra={"minimum": 1})
    method: StrictStr | None = Field(None, description="a served method (default: the first one served)")
    user_id: StrictStr | StrictInt | None = Field(
        None, description="one user of the run's data, by their id in it; without `history`, their known history"
    )
    user_ids: list[StrictStr | StrictInt] | None = Field(
        None, description="several users (with `histories`: one per history; a null history is the user's known one)"
    )
    user: StrictInt | None = Field(None, description="with `history`: the run's user index (TIGER reads it)")
    users: list[StrictInt] | None = Field(None, description="with `histories`: one user index per history")
    drop_unknown: StrictBool = Field(False, description="ignore item ids outside the catalogue instead of a 422")
    exclude_seen: StrictBool = Field(True, description="never recommend an item of the history (default true)")
    exclude: ItemIds | None = Field(
        None, description="item ids no list may hold (out of stock now, say), besides the service's unavailable items"
    )
    excludes: list[ItemIds | None] | None = Field(
        None, description="with `histories` or `user_ids`: one list (or null) per history, of item ids its list may "
        "not hold"
    )


class RecommendResponse(BaseModel):
    method: str
    k: int
    items: list[Recommendation] | None = Field(None, description="the answer to `history`")
    results: list[list[Recommendation]] | None = Field(None, description="the answers to `histories`, in order")


@dataclass(frozen=True)
class Limits:
    max_body: int = 1 << 20  # bytes of one request body
    max_histories: int = 1024  # histories in one request


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_app(
    run_dir: str | Path,
    recommenders: dict[str, Recommender],
    max_batch: int = 64,
    max_wait_ms: float = 5.0,
    limits: Limits | None = None,
):
    """The FastAPI app serving ``recommenders`` (method -> loaded recommender) of the run at ``run_dir``."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from starlette.exceptions import HTTPException

    if not recommenders:
        raise CrabError(f"{run_dir}: nothing to serve")
    limits = limits or Limits()
    batchers = {
        m: DynamicBatcher(partial(r.ranker.rank, progress=False), max_batch, max_wait_ms)
        for m, r in recommenders.items()
    }
    default = next(iter(recommenders))

    @asynccontextmanager
    async def lifespan(app):
        for b in batchers.values():
            b.start()
        yield
        for b in batchers.values():
            await b.stop()
        served = sum(b.stats.get("histories", 0) for b in batchers.values())
        logging.getLogger("crabrec").info("stopped (histories ranked: %d)", served)

    app = FastAPI(
        title="crabrec",
        summary=f"Recommendations from the trained run {Path(run_dir).resolve().name}",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.batchers = batchers

    @app.middleware("http")
    async def access_log(request, call_next):
        start = time.perf_counter()
        response = await call_next(request)
        client = request.client.host if request.client else "-"
        ms = 1000 * (time.perf_counter() - start)
        access.info('%s "%s %s" %d %.1f ms', client, request.method, request.url.path, response.status_code, ms)
        return response

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    async def docs():  # no return annotation: an older FastAPI reads one as a response model, and fails on it
        from crabrec.serve.docs import docs_page

        example = {"history": next(iter(recommenders.values())).item_ids[:3], "k": 10}
        return HTMLResponse(docs_page(app.openapi(), example))

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": clip(" ".join(str(message).split()), 300)}, status_code=status, headers=headers)

    @app.exception_handler(BadRequest)
    async def bad_request(request, exc: BadRequest):
        return error(exc.status, str(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request, exc: HTTPException):
        return error(exc.status_code, exc.detail, exc.headers)  # a 405's Allow among them

    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc: RequestValidationError):
        return error(422, "; ".join(e.get("msg", "invalid") for e in exc.errors()) or "invalid request")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, and what is served."""
        return {"status": "ok", "run": str(run_dir), "methods": list(recommenders)}

    @app.get("/models")
    async def models() -> dict[str, Any]:
        """Every method of the run: whether it is served, its beam width, its catalogue's size, how many of its items
        are unavailable, and its test metrics."""
        return {"run": str(run_dir), "default": default, "models": model_table(Path(run_dir), recommenders)}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        """Batching counters per served method: ranker calls, histories ranked, largest batch."""
        return {m: dict(b.stats) for m, b in batchers.items()}

    @app.post(
        "/recommend",
        response_class=JSONResponse,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": RecommendRequest.model_json_schema()}},
            }
        },
        responses={
            200: {"model": RecommendResponse, "description": "`items` for `history`, `results` for `histories`"},
            400: {"description": "malformed JSON"},
            413: {"description": "body too large, or too many histories"},
            422: {"description": "JSON that is not a valid request: unknown item, empty history, k out of range ..."},
        },
    )
    async def recommend(request: Request):
        """Top-k items for one history or a list of them (concurrent requests are batched together)."""
        body = parse(await read_body(request, limits.max_body))
        method = (named(body.method) or body.method) if body.method else default  # "MOR" as mor
        if method not in recommenders:
            raise BadRequest(422, f"method {method!r}: not served here; served: {', '.join(recommenders)}")
        rec = recommenders[method]
        single = body.history is not None or body.user_id is not None
        if single == (body.histories is not None or body.user_ids is not None):
            raise BadRequest(
                422, "give `history` (one list of item ids) or `user_id`, or `histories` or `user_ids` (several)"
            )
        if (body.user is not None and not single) or (body.users is not None and single):
            raise BadRequest(422, "`user` goes with `history`, `users` with `histories`")
        if body.excludes is not None and single:
            raise BadRequest(422, "`excludes` (one list per history) goes with `histories`; `exclude` with `history`")
        if single:
            histories = None if body.history is None else [body.history]
            user_ids = None if body.user_id is None else [body.user_id]
        else:
            histories, user_ids = body.histories, body.user_ids
        rows_asked = len(histories if histories is not None else user_ids or [])
        if rows_asked > limits.max_histories:
            raise BadRequest(413, f"{rows_asked} histories: at most {limits.max_histories} per request")
        users = [body.user] if body.user is not None else body.users
        try:
            rec.check_k(body.k)
            rows = rec.samples(
                histories, users, body.drop_unknown, body.exclude_seen, user_ids=user_ids, exclude=body.exclude,
                excludes=body.excludes,
            )
        except CrabError as exc:
            raise BadRequest(422, str(exc)) from None
        items, scores = await batchers[method].submit(rows)
        answers = [rec.top_dicts(items[i], scores[i], body.k) for i in range(len(rows))]
        out = {"method": method, "k": body.k} | ({"items": answers[0]} if single else {"results": answers})
        return Response(orjson.dumps(out), media_type="application/json")  # built once, not re-validated

    return app


async def read_body(request, limit: int) -> bytes:
    """The request body, refused with a 413 as soon as it is known to exceed ``limit`` bytes."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BadRequest(413, f"body of {clip(declared, 20)} bytes: at most {limit} bytes")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(413, f"body over {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise BadRequest(400, "client disconnected before the body was read") from None
    return b"".join(chunks)


def parse(raw: bytes) -> RecommendRequest:
    """JSON bytes -> a checked request (400 for what is not JSON, 422 for JSON of the wrong shape)."""
    if not raw.strip():
        raise BadRequest(400, 'empty body; expected a JSON object such as {"history": ["id", ...], "k": 10}')
    try:
        data = loads_unique(raw, parse_constant=_not_json)
    except DuplicateKeyError as exc:  # the last value would win silently
        raise BadRequest(422, str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise BadRequest(400, f"malformed JSON: {clip(str(exc), 120)}") from None
    if not isinstance(data, dict):
        raise BadRequest(422, f"expected a JSON object, got {type(data).__name__}")
    try:
        return RecommendRequest.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(422, schema_error(exc)) from None


def schema_error(exc: ValidationError) -> str:
    """The first problem of a request that does not fit :class:`RecommendRequest`, on one line."""
    seen: dict[str, str] = {}
    for err in exc.errors():  # a union (an item id: string or integer) reports once per branch: keep the first
        loc = [p for n, p in enumerate(err["loc"]) if n == 0 or isinstance(p, int)]  # no branch tags ("str" ...)
        where = ".".join(map(str, loc)) or "body"
        in_ids = bool(loc) and loc[0] in ("history", "histories") and len(loc) > 1 + (loc[0] == "histories")
        msg = "expected an item id (a string or an integer)" if in_ids else err["msg"]
        if loc and loc[0] in ("user", "users") and str(err.get("type", "")).startswith("int"):
            ids = "user_id" if loc[0] == "user" else "user_ids"  # a data user id given as the run's index, say
            msg = f"expected the run's user index, an integer; users of the data by their ids go in `{ids}`"
        seen.setdefault(where, msg)
    where, msg = next(iter(seen.items()))
    more = f" (and {len(seen) - 1} more)" if len(seen) > 1 else ""
    return f"{where}: {msg}{more}"


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON value")


def model_table(run_dir: Path, served: dict[str, Recommender]) -> list[dict[str, Any]]:
    """One entry per registered method: served or not, beam width, catalogue size and unavailable items (when served),
    and its headline test metrics (when evaluated)."""
    from crabrec.methods import methods
    from crabrec.metrics import HEADLINE
    from crabrec.runfiles import RunFiles

    files, table = RunFiles(run_dir), []
    for m in methods():
        try:
            metrics = files.load_metrics(m.name)
        except CrabError:
            metrics = None
        entry: dict[str, Any] = {"method": m.name, "label": m.label, "served": m.name in served}
        if m.name in served:  # its longest list, and its catalogue (with any new items)
            rec = served[m.name]
            entry["max_k"], entry["items"], entry["unavailable"] = rec.max_k, len(rec.item_ids), len(rec.unavailable)
        entry["metrics"] = {k: metrics[k] for k in HEADLINE if k in metrics} if metrics else None
        table.append(entry)
    return table
