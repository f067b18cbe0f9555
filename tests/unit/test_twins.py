"""The sync and async twins say the same thing.

Every read and write the library offers both ways is written twice: a function and its
``_async`` twin, a class and its ``Async`` twin. Twins drift (a named query went out two ways,
one checking its parameters and one not; the replica reader of one side could create a graph).
This check holds each pair to one text: the async side, read as sync code (``await`` dropped,
``async def``, ``async with`` and ``async for`` as their sync forms, ``asyncio.to_thread(f, ...)``
as ``f(...)``, ``asyncio.sleep`` and ``asyncio.Lock`` as ``time.sleep`` and ``threading.Lock``, ``Awaitable[T]``
as ``T``, and ``_async`` and ``Async`` taken out of names), must be the sync side, docstrings
aside. A pair that cannot be one text says why in
:data:`APART`, and the list is exact: a pair that becomes one text must leave it. A pair kept
apart is held too: to the lines in which its two sides differ now (their digest, beside the
reason), so that a change to one side that the other does not share fails until someone reads
the difference it makes and records it.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from pathlib import Path

import agefacts

PACKAGE = Path(agefacts.__file__).parent

# Pairs whose two sides differ by design, by the async side's module and name: why, and the
# digest of the lines in which they differ now (test_the_pairs_kept_apart_differ_only_as_recorded).
APART: dict[tuple[str, str], tuple[str, str]] = {
    ("asyncdb.py", "AsyncDatabase.__init__"): (
        "an async connection reads: it creates no graph and restarts no engine",
        "da4d2a5ab385",
    ),
    ("asyncdb.py", "AsyncDatabase.connect"): (
        "the async connection is opened on the event loop, with its own retry",
        "a2eb207a7422",
    ),
    ("asyncdb.py", "AsyncDatabase.close"): ("no thread lock: the event loop runs one call at a time", "921e6f87cf23"),
    ("asyncdb.py", "AsyncDatabase._cypher_prepared"): ("no thread lock (see close)", "7cb09496376a"),
    ("asyncdb.py", "AsyncDatabase._run"): (
        "a connection closed while idle is opened again by an asyncio lock",
        "aa90387a87db",
    ),
    ("asyncdb.py", "AsyncDatabase._savepoint"): (
        "a task's read is known by a context variable, the sync connection's by a flag its lock's holder sets",
        "a040e74a537d",
    ),
    ("asyncdb.py", "AsyncDatabase.reading"): (
        "tasks share the connection: a task's read is known by a context variable and holds the "
        "connection's turn, where threads wait on the sync connection's lock",
        "edc6ab59cf30",
    ),
    ("memory.py", "AsyncMemory.__init__"): (
        "its connections are opened on first use, on the event loop; it holds two (a sync writer and an "
        "async reader), so it is not given one database as the sync memory may be",
        "489cdcaa3d4c",
    ),
    ("memory.py", "_AsyncPlacedMemory.__init__"): (
        "each server's memory is opened on first use, on the event loop, and its notes read in a thread; "
        "the sync one gives each server's memory a database naming the server",
        "c9558577e0e0",
    ),
    ("memory.py", "AsyncMemory.close"): (
        "the async memory holds a sync writer beside its async reader",
        "8372826f6718",
    ),
    ("memory.py", "AsyncMemory._reading"): ("the async reader is opened on first use", "a2314681acba"),
    ("memory.py", "AsyncMemory.add"): ("writes go through the sync writer in a thread, one at a time", "73bd5f182385"),
    ("placed.py", "AsyncRouter.everywhere"): (
        "servers are asked at once by asyncio.gather, not by a thread each",
        "33c10e92c0de",
    ),
    ("placed.py", "AsyncRouter.opened"): (
        "the event loop's one thread needs no lock to read the members",
        "d00e877b2927",
    ),
    ("replica.py", "AsyncReplicaReads.db"): (
        "an AsyncDatabase never creates a graph: it takes no create=False",
        "dd6debee4f6c",
    ),
}


def _defs(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{f.name}"] = f
    return out


def _sync_name(name: str) -> str:
    name = name.replace("_async", "")
    return re.sub(r"(^|\.|_)Async", r"\1", name)


class _AsSync(ast.NodeTransformer):
    """The async side read as sync code."""

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        fields = {f: getattr(node, f) for f in node._fields}
        return ast.copy_location(ast.FunctionDef(**fields), node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.With(**{f: getattr(node, f) for f in node._fields}), node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.For(**{f: getattr(node, f) for f in node._fields}), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "asyncio":
            if f.attr == "to_thread" and node.args:
                return ast.copy_location(ast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords), node)
            if f.attr == "sleep":
                f.value.id = "time"
            if f.attr == "Lock":
                f.value.id = "threading"
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "Awaitable":
            return node.slice
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = _sync_name(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        node.attr = _sync_name(node.attr)
        return node


def _text(f: ast.FunctionDef | ast.AsyncFunctionDef, as_sync: bool) -> str:
    f = ast.parse(ast.unparse(f)).body[0]  # a copy
    assert isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    body = f.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        f.body = body[1:] or [ast.Pass()]
    f.name = _sync_name(f.name)
    if as_sync:
        f = _AsSync().visit(f)
    return ast.unparse(f)


def twins() -> dict[tuple[str, str], tuple[str, str]]:
    """Each async definition with a sync twin: (module, async name) -> (async text read as
    sync, sync text)."""
    defs = {}
    bases: dict[tuple[str, str], list[str]] = {}  # (module, class) -> the names of its bases
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, f in _defs(tree).items():
            defs[(path.name, name)] = f
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases[(path.name, node.name)] = [b.id for b in node.bases if isinstance(b, ast.Name)]
    # A class's methods include those of its bases in the package (Database's labels are its
    # GraphAdmin's): a twin moved into a base class is still held to its pair. A base with a
    # twin of its own (Memory, AsyncMemory) is paired under its own names already.
    classes = {cls for _, cls in bases}
    for (mod, cls), names in bases.items():
        for base in names:
            if _sync_name(base) != base or "Async" + base in classes:
                continue
            for (_, name), f in list(defs.items()):
                if name.startswith(base + ".") and (mod, f"{cls}.{name.split('.', 1)[1]}") not in defs:
                    defs[(mod, f"{cls}.{name.split('.', 1)[1]}")] = f
    by_name: dict[str, list[tuple[str, str]]] = {}
    for mod, name in defs:
        by_name.setdefault(name, []).append((mod, name))
    out = {}
    for (mod, name), f in defs.items():
        sync = _sync_name(name)
        if sync == name and not isinstance(f, ast.AsyncFunctionDef):
            continue
        found = [k for k in by_name.get(sync, []) if k != (mod, name) and not isinstance(defs[k], ast.AsyncFunctionDef)]
        # The twin in the same module first, else the one other module that has it.
        found.sort(key=lambda k: k[0] != mod)
        if found:
            out[(mod, name)] = (_text(f, True), _text(defs[found[0]], False))
    return out


def test_every_async_twin_reads_as_its_sync_twin():
    pairs = twins()
    # The twins found are the library's: this check finding none would hold nothing.
    assert len(pairs) >= 40
    drifted = {}
    for key, (async_text, sync_text) in sorted(pairs.items()):
        if async_text != sync_text and key not in APART:
            diff = difflib.unified_diff(sync_text.splitlines(), async_text.splitlines(), "sync", "async", lineterm="")
            drifted[key] = "\n".join(diff)
    assert not drifted, "\n\n".join(f"{m}: {n}\n{d}" for (m, n), d in drifted.items())


def _difference(sync_text: str, async_text: str) -> list[str]:
    """The lines one side has and the other does not (no context, no line numbers)."""
    diff = difflib.unified_diff(sync_text.splitlines(), async_text.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def test_the_pairs_kept_apart_differ_only_as_recorded():
    pairs = twins()
    changed = {}
    for key, (_, recorded) in sorted(APART.items()):
        async_text, sync_text = pairs[key]
        lines = _difference(sync_text, async_text)
        if _digest(lines) != recorded:
            changed[key] = f"now {_digest(lines)!r}, recorded {recorded!r}:\n" + "\n".join(lines)
    assert not changed, "one side of a pair kept apart changed without the other; if the difference is meant, " + (
        "record its new digest in APART\n\n" + "\n\n".join(f"{m}: {n} {d}" for (m, n), d in changed.items())
    )


def test_the_pairs_kept_apart_are_twins_that_differ():
    pairs = twins()
    assert not set(APART) - set(pairs), "a pair kept apart no longer exists"
    same = sorted(k for k in APART if pairs[k][0] == pairs[k][1])
    assert not same, f"these read alike now; take them out of APART: {same}"


def test_the_reading_as_sync_is_the_one_described():
    """The rules themselves, on a made-up pair."""
    source = '''
async def fetch_async(db: AsyncDatabase, n: int) -> Table:
    """Doc of one side."""
    async with db.lock:
        rows = await asyncio.to_thread(count, db, n)
    await asyncio.sleep(0.1)
    return await run_named_async(db, "q", {"n": rows})
'''
    sync = '''
def fetch(db: Database, n: int) -> Table:
    """Another doc."""
    with db.lock:
        rows = count(db, n)
    time.sleep(0.1)
    return run_named(db, "q", {"n": rows})
'''
    a, s = (ast.parse(t).body[0] for t in (source, sync))
    assert isinstance(a, ast.AsyncFunctionDef) and isinstance(s, ast.FunctionDef)
    assert _text(a, True) == _text(s, False)
    changed = ast.parse(sync.replace("count(db, n)", "count(db, n + 1)")).body[0]
    assert isinstance(changed, ast.FunctionDef)
    assert _text(a, True) != _text(changed, False)


def test_a_twin_in_a_base_class_is_still_held():
    """``Database`` keeps its set-up, graph and labels in its base ``GraphAdmin``
    (graphadmin.py): ``AsyncDatabase.labels`` and ``keys_stale`` are still read against them,
    and the check fails when they differ."""
    pairs = twins()
    for name in ("AsyncDatabase.labels", "AsyncDatabase.keys_stale"):
        as_sync, sync = pairs[("asyncdb.py", name)]
        assert as_sync == sync, name
