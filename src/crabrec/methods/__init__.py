"""The method registry: every recommender the toolkit compares, in Table 1's order.

A method is one module under ``crabrec/methods/`` that defines its stages and a :class:`Method`, plus one line in
:func:`_builtin`. A method of another package registers through the entry-point group ``crabrec.methods`` (found in
every process, worker processes included), or at run time with :func:`register`. The pipeline (``crabrec run``), the
CLI (``train``/``evaluate``/``finetune`` and their help), the report's Table 1 and the analyses all read this
registry; nothing else lists methods.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crabrec.errors import CrabError
from crabrec.pipeline import Stage
from crabrec.rankers import Ranker


@dataclass(frozen=True)
class Method:
    """One compared method.

    ``stages`` are its own pipeline stages in order; ``trains`` is the one that fits it (None: nothing to fit) and
    ``evaluates`` the one that writes ``models/<name>/metrics.json``. ``cost`` names the stages whose time is the
    method's cost in Table 1. ``knob`` is the setting that trades accuracy against popularity bias (None: none) and
    ``grid`` the values ``crabrec frontier`` tries, crossed with ``axes`` (further ``(dotted key, values)`` pairs);
    ``validate(files, cfg, rows)`` gives the @10 metrics of the method's finished run on validation rows (how the
    frontier picks a point without looking at the test).
    ``ranker(files, cfg, beam=None)`` loads the trained method as a :class:`crabrec.rankers.Ranker`: what its
    evaluation, ``crabrec.load`` and ``crabrec serve`` rank with. ``backbone``: it is built on the MOR decoder, so
    ``train.backbone`` (a pretrained LLM) carries it too. ``sids``: what its rankings are over: the base codebook's
    SIDs, CRAB's ``rebalanced`` ones, or ``none`` (item ids). ``settings``: the method's own settings model (pydantic;
    unknown keys are errors), which the run config gets as its section ``section`` (``cfg.<section>``).
    ``base``: the method whose trained model this one searches or re-ranks; one based on another than MOR (TIGER+PPD
    on TIGER) also gets its change against that one, with CIs, and the report shows it in a table of its own.
    ``control``: ``(dotted key, value)`` settings that turn the method's own change off and keep the rest of its
    procedure (CRAB: ``crab.ratio`` 0, its fine-tune on the unchanged codebook); ``control_free``: keys that do not
    matter at the control. The frontier compares each point with the control point at its other settings.
    """

    name: str
    label: str
    stages: tuple[Stage, ...]
    evaluates: str
    trains: str | None = None
    cost: tuple[str, ...] = ()
    section: str = ""
    knob: str | None = None
    grid: tuple[float, ...] = ()
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    validate: Callable[..., dict[str, float]] | None = None
    ranker: Callable[..., Ranker] | None = None
    backbone: bool = False
    describe: str = ""
    sids: str = "base"
    settings: type | None = None
    base: str = "mor"
    control: tuple[tuple[str, Any], ...] = ()
    control_free: tuple[str, ...] = ()


log = logging.getLogger("crabrec")

PLUGIN_GROUP = "crabrec.methods"  # entry points: a Method, a list of them, or a function returning either
_REGISTRY: dict[str, Method] = {}
_ADDED: list[str] = []  # registered at run time in this process (worker processes get them from added_payload)
_ORIGIN: dict[str, str] = {}  # a method plugin's name -> the distribution (package) it came from
_LOADED = False


def register(method: Method) -> Method:
    """Add ``method`` (after the built-in and installed ones); its name and stage names must be new. Worker processes
    (``--jobs``, the frontier's) get it too, so it must be picklable: defined at the top level of a module."""
    _load()
    _add(method)
    _ADDED.append(method.name)
    return method


def _add(method: Method) -> None:
    taken = {s.name for m in _REGISTRY.values() for s in m.stages}
    clash = [s.name for s in method.stages if s.name in taken]
    if method.name in _REGISTRY or clash:
        raise ValueError(f"method {method.name!r}: name or stages {clash} already registered")
    _check_section(method, list(_REGISTRY.values()))
    _REGISTRY[method.name] = method


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    if name in _ADDED:
        _ADDED.remove(name)


def added_payload() -> bytes:
    """The methods registered at run time in this process, pickled for a worker process (:func:`register_payload`);
    a method that cannot be pickled is a one-line error naming it."""
    added = [_REGISTRY[name] for name in _ADDED if name in _REGISTRY]
    for method in added:
        try:
            pickle.dumps(method)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise CrabError(
                f"method {method.name!r}: registered in this process, but worker processes cannot import it ({exc}); "
                "define its functions and settings at the top level of a module, or run with --jobs 1"
            ) from None
    return pickle.dumps(added)


def register_payload(payload: bytes) -> None:
    """In a worker process: register the methods of :func:`added_payload` (those it does not have yet)."""
    _load()
    for method in pickle.loads(payload):
        if method.name not in _REGISTRY:
            _add(method)


def methods() -> list[Method]:
    """Every registered method, in Table 1's order."""
    _load()
    return list(_REGISTRY.values())


def get(name: str, trained: bool = False, flag: str = "--method") -> Method:
    """The method called ``name`` (``trained``: one that has a training stage), else a one-line error. The name is
    also taken as Table 1 writes it, in any case (``MOR``, ``D²LR``, ``TIGER+CRAB``: see :func:`named`)."""
    choices = [m.name for m in methods() if m.trains or not trained]
    found = named(name)
    if found not in choices:
        raise CrabError(f"{flag} {name!r}: expected one of {', '.join(choices)}")
    return _REGISTRY[found]


def named(name: object) -> str | None:
    """The registered method ``name`` stands for: its name, or its Table 1 label without the note in brackets
    (``D²LR (reconstruction)``: ``D²LR``), compared without case, with ``²`` as ``2`` and ``+`` or ``_`` as ``-``
    (``d2lr``, ``TIGER+CRAB``, ``tiger_crab``); else None."""
    if not isinstance(name, str):
        return None
    every = methods()
    if name in _REGISTRY:
        return name
    spelled = {_spelling(m.label.split(" (")[0]): m.name for m in every} | {_spelling(m.name): m.name for m in every}
    return spelled.get(_spelling(name))


def _spelling(text: str) -> str:
    return text.strip().lower().replace("²", "2").replace("+", "-").replace("_", "-")


def _check_section(method: Method, others: list[Method]) -> None:
    """A method's own settings get a section of their own: not one of the toolkit's, not another method's."""
    from crabrec.config import RunConfig

    if method.settings is None:
        return
    if method.section in RunConfig.model_fields or any(m.settings and m.section == method.section for m in others):
        raise ValueError(f"method {method.name!r}: config section {method.section!r} is already taken")


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for method in _builtin():
        _check_section(method, list(_REGISTRY.values()))
        _REGISTRY[method.name] = method
    for source, dist, method in _installed():
        try:
            _add(method)
        except ValueError as exc:
            log.warning("method plugin %s: %s; skipped", source, exc)
            continue
        if dist:
            _ORIGIN[method.name] = dist


def origin(name: str) -> str | None:
    """The package a method plugin came from (None: a built-in method, or one registered at run time)."""
    _load()
    return _ORIGIN.get(name)


def _installed() -> list[tuple[str, str | None, Method]]:
    """The methods of installed packages (entry-point group ``crabrec.methods``) as ``(entry point, package,
    method)``, in the order of the entry points' names. One that cannot be loaded is skipped with a warning naming
    it, so that a broken plugin cannot stop every command."""
    from importlib.metadata import entry_points

    found = []
    for point in sorted(entry_points(group=PLUGIN_GROUP), key=lambda p: p.name):
        dist = getattr(point.dist, "name", None)
        source = f"{point.name!r} ({point.value}" + (f", from {dist})" if dist else ")")
        try:
            made = point.load()
            if callable(made) and not isinstance(made, Method):
                made = made()
        except Exception as exc:  # noqa: BLE001 (a plugin's own failure, whatever it is, is reported and skipped)
            log.warning("method plugin %s cannot be loaded (%s: %s); skipped", source, type(exc).__name__, exc)
            continue
        made = list(made) if isinstance(made, (list, tuple)) else [made]
        odd = [m for m in made if not isinstance(m, Method)]
        if odd:
            log.warning(
                "method plugin %s: expected a crabrec.methods.Method (or a list of them), got %s; skipped",
                source, type(odd[0]).__name__,
            )  # fmt: skip
            continue
        found += [(source, dist, m) for m in made]
    return found


def _builtin() -> list[Method]:
    from crabrec.methods import (
        crab,
        crab_ppd,
        d2lr,
        mor,
        most_popular,
        ppd,
        ppd_rr,
        random_items,
        rr,
        rw,
        sasrec,
        tiger,
        tiger_crab,
        tiger_ppd,
        tiger_ppd_rr,
        tiger_rr,
    )

    return [
        *(mor.METHOD, tiger.METHOD, sasrec.METHOD, rw.METHOD, rr.METHOD, d2lr.METHOD, crab.METHOD),
        *(ppd.METHOD, ppd_rr.METHOD, crab_ppd.METHOD),
        *(tiger_rr.METHOD, tiger_crab.METHOD, tiger_ppd.METHOD, tiger_ppd_rr.METHOD),
        *(most_popular.METHOD, random_items.METHOD),
    ]
