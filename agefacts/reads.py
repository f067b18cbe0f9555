"""The reads a person asks for: an entity's facts as of a valid time and a known time, and a
predicate's history; entities found by key, name or mention; the graph's digest. Built on the
named queries (:mod:`agefacts.named`) and the read-time rule (:mod:`agefacts.timeline`)."""

from __future__ import annotations

import datetime
import hashlib
import json
import shlex
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .db import Database, Table
from .errors import NotFound, QueryError, UsageError, keys_stale_error, need_text
from .named import named_queries, run_named
from .names import role_named
from .plans import STALE_GRAPH, Named, Plan, run_plan, run_plan_async
from .timeline import FACT_COLUMNS, fact_order

if TYPE_CHECKING:
    # Only the async twins take one: a synchronous read does not pay for asyncio.
    from .asyncdb import AsyncDatabase
    from .ontology import Ontology

__all__ = [
    "TimeArg",
    "as_of",
    "check_scope",
    "current_facts",
    "digest",
    "facts",
    "facts_async",
    "facts_plan",
    "facts_of_each",
    "facts_of_each_async",
    "facts_of_each_plan",
    "facts_of_keys",
    "facts_of_keys_async",
    "facts_of_keys_plan",
    "find_entities",
    "find_entities_async",
    "find_entities_plan",
    "graph_content",
    "history",
    "history_async",
    "history_plan",
    "time_text",
]


TimeArg = str | datetime.date | datetime.datetime | None
"""A time given to a query: ISO-8601 text, a ``date``, or a ``datetime`` (one without a zone
is taken as UTC)."""


def time_text(value: TimeArg) -> str | None:
    """A time argument as the ISO-8601 text the graph stores and compares."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, datetime.date):
        raise UsageError(f"a time is ISO-8601 text, a date or a datetime, not {value!r}")
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return value.isoformat()


def as_of(valid_at: TimeArg, known_at: TimeArg) -> tuple[str, str]:
    """The valid time and known time a read is made at, normalised (both default to now)."""
    from .errors import TimeError
    from .temporal import normalise_instant, normalise_valid, now_instant

    valid_text, known_text = time_text(valid_at), time_text(known_at)
    try:
        valid = normalise_valid(valid_text) if valid_text else now_instant()
    except TimeError as exc:
        raise QueryError(f"time {valid_text!r} {exc}") from None
    try:
        known = normalise_instant(known_text) if known_text else now_instant()
    except TimeError as exc:
        raise QueryError(f"time {known_text!r} {exc}") from None
    return valid, known


def find_entities(db: Database, text: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """Entities matched by key, name or mention (case-insensitive, composed as the key's
    names are: "Zu\u0308rich" finds "Zürich"); ``user`` is the owner."""
    return run_plan(db, find_entities_plan(text, namespace))


def find_entities_plan(text: str, namespace: str | None) -> Plan[list[dict[str, Any]]]:
    """:func:`find_entities` as a plan (:mod:`agefacts.plans`)."""
    text = unicodedata.normalize("NFC", text)
    if text.startswith("ent:"):
        # A key is looked up in the key indexes rather than by scanning every entity.
        by_key: list[dict[str, Any]] = (yield Named("entity_by_key", {"text": text, "namespace": namespace})).dicts()
        if by_key:
            return by_key
    found: list[dict[str, Any]] = (yield Named("entities", {"text": text, "namespace": namespace})).dicts()
    if found or (rel := role_named(text)) is None:
        return found
    return _by_role((yield Named("entity_names", {"namespace": namespace})).dicts(), rel)


def check_scope(namespace: str | None, all_namespaces: bool, found: Iterable[str], what: str) -> None:
    """A question about someone's memory says whose when it could mean more than one: what it
    names (``found``: the namespaces of the entities it matched) lies in one namespace, or a
    namespace is given, or all of them are asked for on purpose. "user" is every namespace's
    owner; "John" may be three people's John."""
    if namespace is not None or all_namespaces:
        return
    spaces = sorted(set(found))
    if len(spaces) <= 1:
        return
    shown = ", ".join(spaces[:5]) + (f" and {len(spaces) - 5} more" if len(spaces) > 5 else "")
    raise QueryError(
        f"{what} is in the memory of {len(spaces)} namespaces ({shown}): give the namespace whose memory to "
        "read (--namespace N; namespace= in the library), or read them all on purpose (--all-namespaces; "
        "all_namespaces=True)"
    )


async def find_entities_async(db: AsyncDatabase, text: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """:func:`find_entities` on an asynchronous connection."""
    return await run_plan_async(db, find_entities_plan(text, namespace))


def _by_role(rows: list[dict[str, Any]], rel: str) -> list[dict[str, Any]]:
    """The entities whose role to the owner is ``rel``: "my partner" finds the one mentioned
    as "my partner Alex" (a mention is matched whole, and this one was longer)."""
    return [
        {"key": r["key"], "namespace": r["namespace"], "type": None, "name": r["name"], "mentions": r["mentions"]}
        for r in rows
        if (r.get("attrs") or {}).get("rel") == rel
    ]


def _entity_keys(entity: str, namespace: str | None, all_namespaces: bool) -> Plan[list[str]]:
    found = yield from find_entities_plan(entity, namespace)
    if not found and (stale := (yield STALE_GRAPH)) is not None:
        raise keys_stale_error(stale)
    return _keys_found(found, entity, namespace, all_namespaces)


def _keys_found(found: list[dict[str, Any]], entity: str, namespace: str | None, all_namespaces: bool) -> list[str]:
    if not found:
        where = f" in namespace {namespace!r}" if namespace else ""
        listing = (
            f"agefacts query --name entities_of --param namespace={shlex.quote(namespace)}"
            if namespace
            else "agefacts query --name entity_names"
        )
        raise NotFound(f"no entity {entity!r}{where}: give a key, a name or a mention", listing)
    check_scope(namespace, all_namespaces, (e["namespace"] for e in found), repr(entity))
    return [e["key"] for e in found]


def facts(
    db: Database,
    entity: str,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
) -> Table:
    """The facts about an entity valid at ``valid_at`` as known at ``known_at`` (both default
    to now; text, ``date`` or ``datetime``), one row per fact as :mod:`agefacts.timeline`
    reads it (its statements counted together), with its earliest quote.
    When the entity is found in more than one namespace, give a ``namespace`` or
    ``all_namespaces=True``."""
    return run_plan(db, facts_plan(entity, namespace, all_namespaces, valid_at, known_at))


def facts_plan(
    entity: str, namespace: str | None, all_namespaces: bool, valid_at: TimeArg, known_at: TimeArg
) -> Plan[Table]:
    """:func:`facts` as a plan (:mod:`agefacts.plans`)."""
    _check_entity(entity, namespace)
    if entity.startswith("ent:"):
        # A key names one entity, in one namespace: when it has facts, they are the answer,
        # and looking the entity up first would only cost a round trip (a quarter of the
        # time); when it has none, the look-up says whether it exists at all.
        table = yield from facts_of_keys_plan([entity], valid_at, known_at)
        if _answers_key(table, entity, namespace):
            return table
        keys = yield from _entity_keys(entity, namespace, all_namespaces)
        return table if keys == [entity] else (yield from facts_of_keys_plan(keys, valid_at, known_at))
    keys = yield from _entity_keys(entity, namespace, all_namespaces)
    return (yield from facts_of_keys_plan(keys, valid_at, known_at))


def _check_entity(entity: object, namespace: object) -> None:
    need_text(entity, "the entity (a key, a name or a mention; 'user' is the owner)")
    need_text(namespace, "the namespace", optional=True)


def _answers_key(table: Table, key: str, namespace: str | None) -> bool:
    """Whether the facts read for ``key`` show it is an entity (of ``namespace``, if given)."""
    rows = table.dicts()
    return bool(rows) and all(
        key in (r["subject_key"], r["object_key"]) and namespace in (None, r["namespace"]) for r in rows
    )


def facts_of_keys(db: Database, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None) -> Table:
    """The facts about entities already found (by key), as :func:`facts` gives them."""
    return run_plan(db, facts_of_keys_plan(keys, valid_at, known_at))


def facts_of_keys_plan(keys: Sequence[str], valid_at: TimeArg, known_at: TimeArg) -> Plan[Table]:
    """:func:`facts_of_keys` as a plan (:mod:`agefacts.plans`)."""
    valid, known = as_of(valid_at, known_at)
    return _facts_table((yield from _versions_of(keys, valid, known)), known)


def facts_of_each(
    db: Database, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None
) -> list[list[dict[str, Any]]]:
    """The facts about each entity key, one list per key in order (``ask``'s linked
    entities), read in one query however many there are."""
    return run_plan(db, facts_of_each_plan(keys, valid_at, known_at))


def facts_of_each_plan(keys: Sequence[str], valid_at: TimeArg, known_at: TimeArg) -> Plan[list[list[dict[str, Any]]]]:
    """:func:`facts_of_each` as a plan (:mod:`agefacts.plans`), for a read that needs the facts
    of what it linked."""
    valid, known = as_of(valid_at, known_at)
    return [_facts_table([one], known).dicts() for one in (yield from _versions_of(keys, valid, known))]


def _versions_of(keys: Sequence[str], valid: str, known: str) -> Plan[list[tuple[str | None, list[dict[str, Any]]]]]:
    # One key: its own query (planned and prepared once for every call with one key).
    # More: one query for all of them, where one per key cost a round trip and a plan each
    # (facts of "user" over 1,251 namespaces: 14 s against 0.8 s in one).
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    if len(keys) == 1:
        params = {"entity": keys[0], "valid_at": valid, "known_at": known}
        return [(keys[0], (yield Named("facts_about", params)).dicts())]
    each: dict[str, Any] = {"entities": keys, "valid_at": valid, "known_at": known}
    rows = _by_entity(keys, (yield Named("facts_about_each", each)).dicts())
    return [(k, rows[k]) for k in keys]


def _by_entity(keys: Sequence[str], rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for r in rows:
        out[r.pop("entity")].append(r)
    return out


async def facts_of_each_async(
    db: AsyncDatabase, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None
) -> list[list[dict[str, Any]]]:
    """:func:`facts_of_each` on an asynchronous connection."""
    return await run_plan_async(db, facts_of_each_plan(keys, valid_at, known_at))


async def facts_async(
    db: AsyncDatabase,
    entity: str,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    valid_at: TimeArg = None,
    known_at: TimeArg = None,
) -> Table:
    """:func:`facts` on an asynchronous connection."""
    return await run_plan_async(db, facts_plan(entity, namespace, all_namespaces, valid_at, known_at))


async def facts_of_keys_async(
    db: AsyncDatabase, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None
) -> Table:
    """:func:`facts_of_keys` on an asynchronous connection."""
    return await run_plan_async(db, facts_of_keys_plan(keys, valid_at, known_at))


def _facts_table(read: Sequence[tuple[str | None, list[dict[str, Any]]]], known: str) -> Table:
    """The facts read for each entity key from the fact versions (the reading of time,
    stored: :func:`agefacts.timeline.versions`), in the order facts are listed; a fact about
    two of the entities (or about one on both sides) is one row. A version's evidence as known
    at ``known`` is counted here from its ``said_at``: the same count in Cypher (a list
    comprehension) cost 5 ms a call on the embedded engine, three quarters of the read."""
    rows: dict[str, dict[str, Any]] = {}
    for _, found in read:
        for r in found:
            if r["fact"] not in rows:
                r["evidence"] = sum(1 for t in r.pop("said_at") or () if t <= known)
                rows[r["fact"]] = r
    ordered = sorted(rows.values(), key=fact_order)
    return Table(list(FACT_COLUMNS), [tuple(d[c] for c in FACT_COLUMNS) for d in ordered])


def current_facts(
    db: Database, namespace: str | None = None, *, valid_at: TimeArg = None, known_at: TimeArg = None
) -> Table:
    """Every fact of one namespace (of all, without one) that holds at ``valid_at`` as known
    at ``known_at`` (both default to now), by the same reading as :func:`facts`."""
    valid, known = as_of(valid_at, known_at)
    params = {"namespace": namespace, "valid_at": valid, "known_at": known}
    return _facts_table([(None, run_named(db, "facts_in", params).dicts())], known)


def history(
    db: Database,
    entity: str,
    predicate: str,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    ontology: Ontology | None = None,
) -> Table:
    """One entity's values for one predicate over time; with ``ontology``, a predicate it
    does not know is an error that names the nearest ones it does."""
    return run_plan(db, history_plan(entity, predicate, namespace, all_namespaces, ontology))


def history_plan(
    entity: str, predicate: str, namespace: str | None, all_namespaces: bool, ontology: Ontology | None
) -> Plan[Table]:
    """:func:`history` as a plan (:mod:`agefacts.plans`)."""
    _check_entity(entity, namespace)
    _check_history(predicate, ontology)
    keys = yield from _entity_keys(entity, namespace, all_namespaces)
    if len(keys) == 1:
        one: Table = yield Named("history", {"entity": keys[0], "predicate": predicate})
        return one
    # One query for all of them (one per key cost a round trip and a plan each), its rows
    # given back entity by entity, each one's in the history order, as one per key gave them.
    each = yield Named("history_each", {"entities": keys, "predicate": predicate})
    columns = each.columns[:-1]
    rows = _by_entity(keys, each.dicts())
    return Table(columns, [tuple(r[c] for c in columns) for k in keys for r in rows[k]])


async def history_async(
    db: AsyncDatabase,
    entity: str,
    predicate: str,
    *,
    namespace: str | None = None,
    all_namespaces: bool = False,
    ontology: Ontology | None = None,
) -> Table:
    """:func:`history` on an asynchronous connection."""
    return await run_plan_async(db, history_plan(entity, predicate, namespace, all_namespaces, ontology))


def _check_history(predicate: str, ontology: Ontology | None) -> None:
    need_text(predicate, "the predicate")
    if ontology is not None and ontology.predicate(predicate) is None:
        near = ontology.nearest_predicates(predicate)
        known = sorted(p.name for p in ontology.predicates)
        hint = f"did you mean {', '.join(near)}?" if near else f"the ontology's predicates: {', '.join(known)}"
        raise QueryError(f"predicate {predicate!r} is not in the ontology; {hint}")


# -- the digest ------------------------------------------------------------------------------------
def graph_content(db: Database, namespace: str | None = None) -> list[str]:
    """Every vertex as (label, k, properties) and every edge as (label, start k, end k,
    properties), each one canonical JSON line, sorted; AGE ids are left out. With
    ``namespace``, that namespace's only (every vertex carries its namespace, and every edge
    joins two of one namespace)."""
    lines: list[str] = []
    queries = named_queries()
    # Read as the engine's text, not decoded: the digest hashes exactly what is stored.
    vertices, edges = queries["graph_vertices"], queries["graph_edges"]
    params = {"namespace": namespace}
    for label, props in db.cypher_raw(vertices.text, params, vertices.columns):
        p = json.loads(props or "{}")
        lines.append(_canon(["V", json.loads(label or "null"), p.get("k"), p]))
    for label, sk, ek, props in db.cypher_raw(edges.text, params, edges.columns):
        lines.append(
            _canon(
                [
                    "E",
                    json.loads(label or "null"),
                    json.loads(sk or "null"),
                    json.loads(ek or "null"),
                    json.loads(props or "{}"),
                ]
            )
        )
    lines.sort()
    return lines


def _canon(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def digest(db: Database, namespace: str | None = None) -> str:
    """One hash of the graph's logical content (see :func:`graph_content`), or of one
    namespace's."""
    h = hashlib.sha256()
    for line in graph_content(db, namespace):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
