"""Reading the graph: ad-hoc Cypher with typed rows, named queries, the digest.

Parameters always travel through ``cypher()``'s parameter argument, never into the query text.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .db import AsyncDatabase, Database, Table, check_label
from .errors import QueryError, UsageError, need_text
from .keys import message_key
from .names import is_entity_label
from .ontology import Ontology
from .timeline import FACT_COLUMNS, fact_order, fact_rows

if TYPE_CHECKING:
    from .load import Summary

__all__ = [
    "NamedQuery",
    "TimeArg",
    "as_of",
    "demo",
    "bind_named",
    "check_scope",
    "current_facts",
    "digest",
    "facts",
    "facts_async",
    "facts_of_each",
    "facts_of_each_async",
    "facts_of_keys",
    "facts_of_keys_async",
    "find_entities",
    "find_entities_async",
    "graph_content",
    "history",
    "history_async",
    "named_queries",
    "return_columns",
    "run",
    "run_named",
    "run_named_async",
    "time_text",
]


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and string literals."""
    parts, depth, buf, quote, i = [], 0, [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif c in "([{":
            depth += 1
            buf.append(c)
        elif c in ")]}":
            depth -= 1
            buf.append(c)
        elif c == sep and depth == 0:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(c)
        i += 1
    parts.append("".join(buf))
    return parts


_RETURN = re.compile(r"\bRETURN\b(\s+DISTINCT\b)?", re.IGNORECASE)
_TAIL = re.compile(r"\s+(ORDER\s+BY|SKIP|LIMIT)\b.*$", re.IGNORECASE | re.DOTALL)
_ALIAS = re.compile(r"^(.*?)\s+AS\s+`?([^`]+?)`?\s*$", re.IGNORECASE | re.DOTALL)


@functools.lru_cache(maxsize=512)
def _blank_strings(text: str) -> str:
    """The query with string literals and comments blanked out, same length, for searching.
    Kept per text: a shipped query is read character by character once, not on every run
    (it was half of ``facts``' time on the embedded engine)."""
    out, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                out.append("  ")
                i += 2
                continue
            out.append(" " if c != quote else c)
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            out.append(c)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def return_columns(query: str) -> list[str]:
    """The names of a query's result columns, read from its last RETURN clause: the alias
    where there is one, otherwise the expression as written. A query without RETURN has no
    columns."""
    return list(_return_columns(query))


@functools.lru_cache(maxsize=512)
def _return_columns(query: str) -> tuple[str, ...]:
    names = [name for _, name in _return_items(query)]
    seen: dict[str, int] = {}
    unique = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        unique.append(n if seen[n] == 1 else f"{n}_{seen[n]}")
    return tuple(unique)


@functools.lru_cache(maxsize=512)
def _return_items(query: str) -> tuple[tuple[str, str], ...]:
    """The last RETURN clause's items as (expression, column name), whitespace collapsed."""
    blank = _blank_strings(query)
    matches = list(_RETURN.finditer(blank))
    if not matches:
        return ()
    start = matches[-1].end()
    body = query[start:]
    tail = _TAIL.search(_blank_strings(body))
    if tail:
        body = body[: tail.start()]
    items = []
    for item in _split_top(body):
        item = " ".join(item.split())
        if not item:
            raise QueryError(f"cannot read the RETURN clause of {query!r}; pass --columns")
        m = _ALIAS.match(item)
        items.append((m.group(1), m.group(2)) if m else (item, item))
    return tuple(items)


def run(
    db: Database,
    query: str,
    params: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    *,
    prepared: bool = False,
) -> Table:
    """Run a Cypher query and return decoded rows keyed by the result column names. A
    ``$name`` the query uses and ``params`` leaves out is an error that names it.
    ``prepared``: as a prepared statement (the named queries, run again and again)."""
    used = set(_PARAM_USE.findall(_blank_strings(query)))
    if missing := sorted(used - set(params or {})):
        raise QueryError(
            f"the query uses {', '.join('$' + m for m in missing)} but no value was given: "
            + " ".join(f"--param {m}=..." for m in missing)
        )
    names = list(columns) if columns else return_columns(query)
    sql_cols = [f"c{i}" for i in range(len(names))] or ["c0"]
    table = db.cypher(query, params or None, sql_cols, prepared=prepared)
    if not names:
        return Table([], [])
    return Table(names, table.rows)


def graph_content(db: Database) -> list[str]:
    """Every vertex as (label, k, properties) and every edge as (label, start k, end k,
    properties), each one canonical JSON line, sorted; AGE ids are left out."""
    lines: list[str] = []
    queries = named_queries()
    # Read as the engine's text, not decoded: the digest hashes exactly what is stored.
    vertices, edges = queries["graph_vertices"], queries["graph_edges"]
    for label, props in db.cypher_raw(vertices.text, columns=vertices.columns):
        p = json.loads(props or "{}")
        lines.append(_canon(["V", json.loads(label or "null"), p.get("k"), p]))
    for label, sk, ek, props in db.cypher_raw(edges.text, columns=edges.columns):
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


def digest(db: Database) -> str:
    """One hash of the graph's logical content (see :func:`graph_content`)."""
    h = hashlib.sha256()
    for line in graph_content(db):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


# -- named queries ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class NamedQuery:
    """A query shipped in ``cypher/`` (Cypher) or ``sql/queries/`` (SQL over agefacts' own
    tables). Its header comment gives one line of description, a ``params:`` line (``none``
    when it takes none) and a ``columns:`` line naming what it returns, in order."""

    name: str
    kind: str  # cypher | sql
    description: str
    params: list[str]
    params_doc: str
    text: str
    columns: list[str]
    # "runs: once per entity label" in the header: the query's first line is ``MATCH (n)``, and
    # it reads only entity types' labels (see :func:`_per_entity_label`).
    per_entity_label: bool = False
    # "keys: NAME = KIND(PARAM, ...)" in the header: $NAME is the key of that kind made from
    # the parameters (null when one is null), so the query finds its vertex by the key index.
    keys: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def required(self) -> list[str]:
        """The parameters its header does not say may be null."""
        docs = dict(_PARAM_NAME.findall(self.params_doc))
        return [p for p in self.params if "null" not in docs.get(p, "")]


_PARAM_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?")
_PARAM_USE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def _parse_named(name: str, kind: str, raw: str) -> NamedQuery:
    marker = "//" if kind == "cypher" else "--"
    header: list[str] = []
    body: list[str] = []
    for line in raw.splitlines():
        if not body and line.startswith(marker):
            header.append(line[len(marker) :].strip())
        elif line.strip() or body:
            body.append(line)
    description = header[0] if header else ""
    params_doc = next((h[len("params:") :].strip() for h in header if h.startswith("params:")), "")
    params = [m.group(1) for m in _PARAM_NAME.finditer(re.sub(r"\([^)]*\)", "", params_doc))]
    if params == ["none"]:
        params = []
    columns_doc = next((h[len("columns:") :] for h in header if h.startswith("columns:")), "")
    columns = [c.strip() for c in columns_doc.split(",") if c.strip()]
    per_label = any(h.startswith("runs:") and "once per entity label" in h for h in header)
    keys = tuple(
        (m.group(1), m.group(2), tuple(a.strip() for a in m.group(3).split(",")))
        for h in header
        if h.startswith("keys:")
        for m in _KEY_PARAM.finditer(h[len("keys:") :])
    )
    for _, kind_, args in keys:
        if kind_ not in _KEY_KINDS or not set(args) <= set(params):
            raise QueryError(f"query {name!r}: its keys line names {kind_}({', '.join(args)}), which it cannot make")
    body_text = "\n".join(body).strip()
    return NamedQuery(name, kind, description, params, params_doc, body_text, columns, per_label, keys)


_KEY_PARAM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([a-z]+)\(([^)]*)\)")
# The key kinds a named query can be given, by the one function that makes each (agefacts.keys).
_KEY_KINDS: dict[str, Callable[..., str]] = {"message": message_key}


# The opening MATCH (n) of a query run per entity label, and its closing ORDER BY.
_ALL_VERTICES = re.compile(r"\AMATCH \(n\)(?=\s)")
_ORDER_TAIL = re.compile(r"\n\s*ORDER BY ([^\n]*)\Z", re.IGNORECASE)


def _per_entity_label(q: NamedQuery, labels: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    return _per_label_text(q.name, q.text, tuple(q.columns), labels)


@functools.lru_cache(maxsize=64)
def _per_label_text(
    name: str, text: str, columns: tuple[str, ...], labels: tuple[str, ...]
) -> tuple[str, tuple[int, ...]]:
    """A query written over every vertex (``MATCH (n)``) as the UNION ALL of the same query
    over each entity type's label, and the positions of the columns its ORDER BY names, to
    sort the rows by in Python (a UNION ALL cannot be ordered; text by code point, not by the
    engine's collation). ``MATCH (n)`` reads every vertex label, statements and messages
    included: finding an entity by name at 100k statements took 127 ms that way, 4 ms reading
    the entity labels by namespace."""
    if not _ALL_VERTICES.match(text):
        raise QueryError(f"query {name!r} runs once per entity label, so it must start with MATCH (n)")
    body = text
    order: tuple[int, ...] = ()
    tail = _ORDER_TAIL.search(body)
    if tail:
        body = body[: tail.start()]
        returned = {expr: columns.index(name) for expr, name in _return_items(text) if name in columns}
        try:
            order = tuple(returned[item.strip()] for item in tail.group(1).split(","))
        except KeyError as exc:
            raise QueryError(f"query {name!r} orders by {exc.args[0]}, which it does not return") from None
    parts = [_ALL_VERTICES.sub(f"MATCH (n:{check_label(label)})", body, count=1) for label in labels]
    return "\nUNION ALL\n".join(parts), order


def _entity_labels(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(sorted(n for n, kind in labels.items() if is_entity_label(n, kind)))


def _sorted_rows(rows: list[tuple[Any, ...]], order: Sequence[int]) -> list[tuple[Any, ...]]:
    if not order:
        return rows
    return sorted(rows, key=lambda r: tuple(_order_key(r[i]) for i in order))


def _order_key(value: Any) -> tuple[bool, str, Any]:
    # Nulls last, as Cypher orders them; values of different types are never compared.
    if value is None:
        return (True, "", 0)
    return (False, type(value).__name__, value if isinstance(value, (str, int, float)) else repr(value))


def named_queries() -> dict[str, NamedQuery]:
    """The shipped queries by name (read from the package once: they do not change)."""
    return dict(_shipped_queries())


@functools.cache
def _shipped_queries() -> dict[str, NamedQuery]:
    from importlib import resources

    out: dict[str, NamedQuery] = {}
    for pkg, kind, ext in (("agefacts._cypher", "cypher", ".cypher"), ("agefacts._sql.queries", "sql", ".sql")):
        for entry in resources.files(pkg).iterdir():
            if entry.name.endswith(ext):
                name = entry.name[: -len(ext)]
                out[name] = _parse_named(name, kind, entry.read_text(encoding="utf-8"))
    return dict(sorted(out.items()))


def bind_named(name: str, params: Mapping[str, Any] | None = None) -> tuple[NamedQuery, dict[str, Any]]:
    """A named query and the values it runs with: those it declares and the caller leaves
    out are null; an unknown name, an unknown parameter or a missing required one is an error
    that names it."""
    queries = named_queries()
    if name not in queries:
        raise QueryError(f"no named query {name!r}; `agefacts query --list` shows them")
    q = queries[name]
    given = dict(params or {})
    unknown = sorted(set(given) - set(q.params))
    if unknown:
        raise QueryError(
            f"query {name!r} takes no parameter {', '.join(unknown)}; it takes: {', '.join(q.params) or 'none'}"
        )
    if missing := [p for p in q.required if p not in given]:
        raise QueryError(
            f"query {name!r} needs {', '.join(missing)}: "
            + " ".join(f"--param {m}=..." for m in missing)
            + f" ({q.params_doc})"
        )
    values = {p: given.get(p) for p in q.params}
    for param, kind, args in q.keys:
        parts = [values[a] for a in args]
        values[param] = None if any(v is None for v in parts) else _KEY_KINDS[kind](*parts)
    return q, values


def run_named(db: Database, name: str, params: Mapping[str, Any] | None = None) -> Table:
    """Run a named query; parameters it declares and the caller leaves out are null."""
    q, values = bind_named(name, params)
    if q.kind == "sql":
        return db.table(q.text, {**values, "graph": db.graph})
    if q.per_entity_label:
        labels = _entity_labels(db.labels())
        if not labels:
            return Table(q.columns, [])
        text, order = _per_entity_label(q, labels)
        return Table(q.columns, _sorted_rows(run(db, text, values, q.columns, prepared=True).rows, order))
    return run(db, q.text, values, q.columns, prepared=True)


async def run_named_async(db: AsyncDatabase, name: str, params: Mapping[str, Any] | None = None) -> Table:
    """:func:`run_named` on an asynchronous connection."""
    q, values = bind_named(name, params)
    if q.kind == "sql":
        return await db.table(q.text, {**values, "graph": db.graph})
    if q.per_entity_label:
        labels = _entity_labels(await db.labels())
        if not labels:
            return Table(q.columns, [])
        text, order = _per_entity_label(q, labels)
        return Table(q.columns, _sorted_rows((await db.cypher(text, values, q.columns, prepared=True)).rows, order))
    return await db.cypher(q.text, values, q.columns, prepared=True)


# -- facts and history ------------------------------------------------------------------------------
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
    text = unicodedata.normalize("NFC", text)
    if text.startswith("ent:"):
        # A key is looked up in the key indexes rather than by scanning every entity.
        by_key = run_named(db, "entity_by_key", {"text": text, "namespace": namespace}).dicts()
        if by_key:
            return by_key
    return run_named(db, "entities", {"text": text, "namespace": namespace}).dicts()


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
    text = unicodedata.normalize("NFC", text)
    if text.startswith("ent:"):
        by_key = (await run_named_async(db, "entity_by_key", {"text": text, "namespace": namespace})).dicts()
        if by_key:
            return by_key
    return (await run_named_async(db, "entities", {"text": text, "namespace": namespace})).dicts()


def _entity_keys(db: Database, entity: str, namespace: str | None, all_namespaces: bool) -> list[str]:
    return _keys_found(find_entities(db, entity, namespace), entity, namespace, all_namespaces)


def _keys_found(found: list[dict[str, Any]], entity: str, namespace: str | None, all_namespaces: bool) -> list[str]:
    if not found:
        where = f" in namespace {namespace!r}" if namespace else ""
        raise QueryError(
            f"no entity {entity!r}{where}: give a key, a name or a mention (`agefacts query --name entities`)"
        )
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
    _check_entity(entity, namespace)
    if entity.startswith("ent:"):
        # A key names one entity, in one namespace: when it has facts, they are the answer,
        # and looking the entity up first would only cost a round trip (a quarter of the
        # time); when it has none, the look-up says whether it exists at all.
        table = facts_of_keys(db, [entity], valid_at, known_at)
        if _answers_key(table, entity, namespace):
            return table
        keys = _entity_keys(db, entity, namespace, all_namespaces)
        return table if keys == [entity] else facts_of_keys(db, keys, valid_at, known_at)
    return facts_of_keys(db, _entity_keys(db, entity, namespace, all_namespaces), valid_at, known_at)


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
    valid, known = as_of(valid_at, known_at)
    return _facts_table(_statements_of(db, keys, known), valid)


def facts_of_each(
    db: Database, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None
) -> list[list[dict[str, Any]]]:
    """The facts about each entity key, one list per key in order (``ask``'s linked
    entities), read in one query however many there are."""
    valid, known = as_of(valid_at, known_at)
    return [_facts_table([one], valid).dicts() for one in _statements_of(db, keys, known)]


def _statements_of(db: Database, keys: Sequence[str], known: str) -> list[tuple[str | None, list[dict[str, Any]]]]:
    # One key: its own query (planned and prepared once for every call with one key).
    # More: one query for all of them, where one per key cost a round trip and a plan each
    # (facts of "user" over 1,251 namespaces: 14 s against 0.8 s in one).
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    if len(keys) == 1:
        rows = {keys[0]: run_named(db, "fact_statements", {"entity": keys[0], "known_at": known}).dicts()}
    else:
        rows = _by_entity(keys, run_named(db, "fact_statements_of", {"entities": keys, "known_at": known}).dicts())
    for k in keys:
        for subject, predicate in _groups(rows[k], k):
            rows[k] += run_named(
                db, "group_statements", {"subject": subject, "predicate": predicate, "known_at": known}
            ).dicts()
    return [(k, rows[k]) for k in keys]


async def _statements_of_async(
    db: AsyncDatabase, keys: Sequence[str], known: str
) -> list[tuple[str | None, list[dict[str, Any]]]]:
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    if len(keys) == 1:
        rows = {keys[0]: (await run_named_async(db, "fact_statements", {"entity": keys[0], "known_at": known})).dicts()}
    else:
        params = {"entities": keys, "known_at": known}
        rows = _by_entity(keys, (await run_named_async(db, "fact_statements_of", params)).dicts())
    for k in keys:
        for subject, predicate in _groups(rows[k], k):
            params = {"subject": subject, "predicate": predicate, "known_at": known}
            rows[k] += (await run_named_async(db, "group_statements", params)).dicts()
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
    valid, known = as_of(valid_at, known_at)
    return [_facts_table([one], valid).dicts() for one in await _statements_of_async(db, keys, known)]


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
    _check_entity(entity, namespace)
    if entity.startswith("ent:"):
        table = await facts_of_keys_async(db, [entity], valid_at, known_at)
        if _answers_key(table, entity, namespace):
            return table
        keys = _keys_found(await find_entities_async(db, entity, namespace), entity, namespace, all_namespaces)
        return table if keys == [entity] else await facts_of_keys_async(db, keys, valid_at, known_at)
    keys = _keys_found(await find_entities_async(db, entity, namespace), entity, namespace, all_namespaces)
    return await facts_of_keys_async(db, keys, valid_at, known_at)


async def facts_of_keys_async(
    db: AsyncDatabase, keys: Sequence[str], valid_at: TimeArg = None, known_at: TimeArg = None
) -> Table:
    """:func:`facts_of_keys` on an asynchronous connection."""
    valid, known = as_of(valid_at, known_at)
    return _facts_table(await _statements_of_async(db, keys, known), valid)


def _groups(rows: list[dict[str, Any]], key: str) -> list[tuple[str, str]]:
    """The single-valued groups ``key`` is a value of (as object), whose other values can end
    its facts and are read besides."""
    return sorted({(r["subject_key"], r["predicate"]) for r in rows if r["single_valued"] and r["object_key"] == key})


def _facts_table(read: Sequence[tuple[str | None, list[dict[str, Any]]]], valid_at: str) -> Table:
    """The facts about each entity key (every fact, for None), from the statements read for
    it by the one reading of time (:mod:`agefacts.timeline`); a fact about two of the
    entities is one row."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, statements in read:
        once = list({r["statement"]: r for r in statements}.values())
        for r in fact_rows(once, valid_at, about=key):
            rows.setdefault((r["statement"], r["valid_from"], r["valid_until"]), r)
    ordered = sorted(rows.values(), key=fact_order)
    return Table(list(FACT_COLUMNS), [tuple(d[c] for c in FACT_COLUMNS) for d in ordered])


def current_facts(
    db: Database, namespace: str | None = None, *, valid_at: TimeArg = None, known_at: TimeArg = None
) -> Table:
    """Every fact of one namespace (of all, without one) that holds at ``valid_at`` as known
    at ``known_at`` (both default to now), by the same reading as :func:`facts`."""
    valid, known = as_of(valid_at, known_at)
    return _facts_table(
        [(None, run_named(db, "statements", {"namespace": namespace, "known_at": known}).dicts())], valid
    )


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
    _check_entity(entity, namespace)
    _check_history(predicate, ontology)
    tables = [
        run_named(db, "history", {"entity": k, "predicate": predicate})
        for k in _entity_keys(db, entity, namespace, all_namespaces)
    ]
    return Table(tables[0].columns, [r for t in tables for r in t.rows])


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
    _check_entity(entity, namespace)
    _check_history(predicate, ontology)
    keys = _keys_found(await find_entities_async(db, entity, namespace), entity, namespace, all_namespaces)
    tables = [await run_named_async(db, "history", {"entity": k, "predicate": predicate}) for k in keys]
    return Table(tables[0].columns, [r for t in tables for r in t.rows])


def _check_history(predicate: str, ontology: Ontology | None) -> None:
    need_text(predicate, "the predicate")
    if ontology is not None and ontology.predicate(predicate) is None:
        import difflib

        known = sorted(p.name for p in ontology.predicates)
        near = difflib.get_close_matches(predicate, known, n=3)
        hint = f"did you mean {', '.join(near)}?" if near else f"the ontology's predicates: {', '.join(known)}"
        raise QueryError(f"predicate {predicate!r} is not in the ontology; {hint}")


def demo(db: Database, ontology: Ontology) -> tuple[Summary, Table]:
    """Load the shipped example conversations and read some current facts with their quotes
    (what ``agefacts demo`` prints)."""
    from importlib import resources

    from .load import load_paths

    with resources.as_file(resources.files("agefacts.examples")) as folder:
        summary = load_paths(db, [folder], ontology)
    shown = ("namespace", "subject", "predicate", "object", "quote")
    rows = sorted(
        (
            (
                r["namespace"],
                r["subject"],
                r["predicate"],
                r["object"] if r["object"] is not None else r["value"],
                r["quote"],
            )
            for r in current_facts(db).dicts()
        ),
        key=lambda row: tuple("" if x is None else str(x) for x in row),
    )
    return summary, Table(list(shown), rows[:12])
