"""A first load: conversations loaded into a graph that holds none of agefacts' labels yet.

An ordinary load writes batch by batch, each in a transaction of its own, into labels that
carry their indexes: every key is looked up, every row goes through the unique key index and
the search indexes as it is written, what other conversations share is read back and derived
again, and the fact versions of every chain a batch touches are read back and written again
(a person's chain is read whole once per batch that adds to it). Into an empty graph none of
that is needed, because everything the graph will hold comes from this load:

- the batches are written in ONE transaction, into labels created without agefacts' indexes;
- a key is new unless an earlier batch of this load wrote it (the client remembers every
  key's id), so there is no look-up, and every new row goes in by ``COPY``;
- a vertex that several batches write (an entity, a statement said again) is merged and
  derived in the client, by the same rules (:mod:`agefacts.derive`, the engine's text order
  for mention words), and written once more at the end;
- then the indexes are built (:meth:`agefacts.db.Database.ensure_labels`) while the fact
  versions of every chain are worked out from the statements as this load wrote them (nothing
  is read back), and written once.

Nothing is visible before the commit, indexes included. A failure anywhere rolls the whole
of it back, and the loader writes the same batches again by the ordinary path, which says
which conversation failed and why; the graph is the ordinary path's either way (same
digest: tests/integration/test_first_load.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from . import derive
from .bulk import Batch, BulkWriter, ReadElsewhere, _foreign_key, _keep, _patch, statement_row
from .clock import stage

__all__ = ["FirstLoad"]


class FirstLoad:
    """Writes the batches of a first load through ``writer`` (its database already inside
    the load's one transaction), then :meth:`finish` merges, indexes and derives."""

    def __init__(self, writer: BulkWriter):
        self.writer = writer
        self.db = writer.db
        self.clock = writer.clock
        self.vertex_labels: set[str] = set()
        self.edge_labels: set[str] = set()
        self.ids: dict[str, int] = {}  # every vertex key written -> its graph id
        self.edges: dict[str, set[str]] = defaultdict(set)  # by label, every edge key written
        # The vertices conversations share (entities, statements, keyphrases): the row as
        # copied, and every mention or evidence edge a batch gave them, to merge and derive
        # them again when a later batch writes them too.
        self.copied: dict[str, str] = {}
        # Each entity's mention and each statement's evidence edges, as written (their end's
        # key, their properties as JSON): from the batch's edges, since a batch prepared in a
        # worker process comes back without the parsed ones (Batch.edges_of).
        self.said_of: dict[str, list[tuple[str, str]]] = defaultdict(list)
        # What the reading of time is given for each statement (statement_rows): its subject,
        # its object, and the message each piece of its evidence is in.
        self.subject_of: dict[str, str] = {}
        self.object_of: dict[str, str] = {}
        self.messages: dict[str, str] = {}  # message key -> its row as JSON
        self.final: dict[str, dict[str, Any]] = {}  # the properties of those derived again
        self.merged: dict[str, dict[str, Any]] = {}  # key -> its properties merged over batches
        self.label_of: dict[str, str] = {}
        self.entities: set[str] = set()  # the keys of the entities some batch mentions
        self.derive_again: set[str] = set()  # written by several batches, or left to the engine's order
        self.rows = 0

    def write_batch(self, batch: Batch) -> None:
        with stage(self.clock, "labels"):
            todo_v = [label for label in batch.vertex_labels if label not in self.vertex_labels]
            todo_e = [label for label in batch.edge_labels if label not in self.edge_labels]
            if todo_v or todo_e:
                self.db.create_labels(vertex=todo_v, edge=todo_e)
                self.vertex_labels.update(todo_v)
                self.edge_labels.update(todo_e)
        self.entities.update(batch.entity_labels)
        new: dict[str, list[int]] = {}
        for label, rows, keys in batch.vertices:
            new[label] = []
            for i, k in enumerate(keys):
                if k in self.ids:
                    self._merge(label, k, rows[i])
                else:
                    new[label].append(i)
            for k in batch.unsure & set(keys):
                self.derive_again.add(k)
                self.label_of[k] = label
        with stage(self.clock, "key look-up"):  # ids from the labels' sequences
            entries = self.writer._entries({label: len(todo) for label, todo in new.items()})
        for label, rows, keys in batch.vertices:
            if not new[label]:
                continue
            lid, taken = entries[label]
            high = lid << 48
            shared = label not in _OWN
            for i, n in zip(new[label], taken, strict=True):
                self.ids[keys[i]] = high | n
                if shared:
                    self.copied[keys[i]] = rows[i]
                    self.label_of[keys[i]] = label
            if label == "Message":
                self.messages.update((keys[i], rows[i]) for i in new[label])
            with stage(self.clock, "vertices"):
                self.writer.write_new_vertices(
                    label, ((high | n, rows[i]) for i, n in zip(new[label], taken, strict=True))
                )
            self.rows += len(taken)
        todo: dict[str, list[tuple[str, str, str]]] = {}
        for label, erows, ekeys in batch.edges:
            written = self.edges[label]
            todo[label] = [r for r, ek in zip(erows, ekeys, strict=True) if ek not in written]
            written.update(ekeys)
            if label in _DERIVED_FROM:
                said_of = self.said_of
                for s_, e_, pj in todo[label]:
                    said_of[s_].append((e_, pj))
            elif label == "SUBJECT_OF":
                self.subject_of.update((e_, s_) for s_, e_, _ in todo[label])
            elif label == "ABOUT":
                self.object_of.update((s_, e_) for s_, e_, _ in todo[label])
        with stage(self.clock, "edges"):
            self.writer.copy_new_edges(todo, self.ids)
        self.rows += sum(len(erows) for erows in todo.values())

    def _merge(self, label: str, k: str, row: str) -> None:
        """A vertex an earlier batch wrote, written again: its properties merged over what it
        had, as the ordinary path's upsert merges them (later values win, the derived ones
        kept to be derived again from every batch's edges)."""
        if k not in self.copied:
            # A conversation or a message written twice is not a first load's to merge (the
            # ordinary path takes the whole load).
            raise _NotFirstLoad(f"{label} {k!r} written by two batches")
        props = self.merged.get(k)
        if props is None:
            props = self.merged[k] = json.loads(self.copied[k])
        new = json.loads(row)
        if props.get("namespace") != new.get("namespace"):
            raise _foreign_key(label, k, props.get("namespace"), new.get("namespace"))
        keep = _keep(label)
        props.update((f, v) for f, v in new.items() if f not in keep)
        self.derive_again.add(k)

    def finish(self, read_elsewhere: ReadElsewhere | None = None) -> None:
        """What the batches leave to the end: the shared vertices derived from every batch's
        edges, the indexes, and the fact versions of every chain. The versions are read from
        the statements this load wrote (:meth:`statement_rows`, made on a thread), not read
        back from the graph, on that thread or by ``read_elsewhere`` (the loader's worker
        processes, idle now), while the server builds the indexes; the versions' own labels are
        indexed after their rows."""
        with stage(self.clock, "derived properties"):
            self._derive()

        def rows() -> list[dict[str, Any]]:
            # On a thread while the server builds indexes: its seconds are not this stage's.
            with stage(None if self.clock is None else self.clock.client_only(), "fact versions"):
                return self.statement_rows()

        def meanwhile() -> None:
            with stage(self.clock, "indexes"):
                self.db.ensure_labels(
                    vertex=sorted(self.vertex_labels - _VERSIONS), edge=sorted(self.edge_labels - _VERSIONS)
                )

        with stage(self.clock, "fact versions"):
            self.writer.fresh_versions = True
            self.writer.while_reading = meanwhile
            self.writer.read_elsewhere = read_elsewhere
            try:
                self.writer.write_versions_of(rows, self.ids, {}, {})
            finally:
                self.writer.fresh_versions = False
                self.writer.while_reading = None
                self.writer.read_elsewhere = None
        with stage(self.clock, "indexes"):
            # Those of the versions' labels (and every other, when no version was read).
            self.db.ensure_labels(vertex=sorted(self.vertex_labels), edge=sorted(self.edge_labels))

    def statement_rows(self) -> list[dict[str, Any]]:
        """Every statement this load wrote that has evidence, as the reading of time takes it
        (:func:`agefacts.bulk.statement_row`): what :meth:`BulkWriter.refresh_versions` reads
        back from the graph, made from the rows as written (their properties as derived at the
        end, for those derived again). Every statement's chain is this load's alone, so each is
        read whole."""
        place: dict[str, tuple[str, int]] = {}  # message key -> (conversation, ordinal)
        named: dict[str, tuple[Any, Any]] = {}  # object key -> (its key, its name): many statements' object

        def props(k: str) -> dict[str, Any]:
            got = self.final.get(k)
            return got if got is not None else json.loads(self.copied[k])

        rows = []
        for stk, sk in self.subject_of.items():
            said = []
            for mk, pj in self.said_of.get(stk, ()):
                where = place.get(mk)
                if where is None:
                    m = json.loads(self.messages[mk])
                    where = place[mk] = (m["conversation"], int(m["ordinal"]))
                e = json.loads(pj)
                said.append([e.get("at"), e["k"], e.get("quote"), *where, e.get("char_start"), e.get("char_end")])
            if not said:
                continue
            okey = oname = None
            if (obj := self.object_of.get(stk)) is not None:
                if (got := named.get(obj)) is None:
                    o = props(obj)
                    got = named[obj] = (o.get("k"), o.get("name"))
                okey, oname = got
            rows.append(statement_row(props(stk), sk, okey, oname, said))
        return rows

    def _derive(self) -> None:
        edges_of = {k: [json.loads(pj) for _, pj in self.said_of.get(k, ())] for k in self.derive_again}
        words: set[str] = set()
        for k in self.derive_again:
            if k in self.entities:
                found = {w for m in edges_of[k] for w in m.get("mentions") or ()}
                if len(found) > 1:
                    words |= found
        order = self.writer._engine_order(words)
        patches: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for k in sorted(self.derive_again):
            label = self.label_of[k]
            was = json.loads(self.copied[k])
            props = self.merged.get(k) or dict(was)
            target = None
            if label == "Statement":
                target = derive.statement_props(edges_of[k])
            elif k in self.entities:
                target = derive.entity_props(edges_of[k], order)
            if target is not None:
                for f, v in target.items():
                    if v is None:
                        props.pop(f, None)
                    else:
                        props[f] = v
            self.final[k] = props
            patches[label] += _patch(self.ids[k], was, {f: props.get(f) for f in set(was) | set(props)})
        for label, todo in sorted(patches.items()):
            with stage(self.clock, "vertices"):
                self.writer._write_patches(label, todo)


# What one conversation's rows alone hold (their keys name the conversation): never written by
# two batches of a first load. Every other vertex (entities, statements, keyphrases) may be.
_OWN = frozenset({"Conversation", "Message"})

# The edges whose properties a vertex's derived ones come from (agefacts.derive): an entity's
# mentions, a statement's evidence.
_DERIVED_FROM = frozenset({"MENTIONED_IN", "EVIDENCED_BY"})

# The fact versions' labels: written last, from the rest of the graph, and indexed after.
_VERSIONS = frozenset({"Fact", "HOLDS", "OBJECT"})


class _NotFirstLoad(Exception):
    """What makes a load not a first load after all: the loader rolls it back and the ordinary
    path takes it whole (never reaches a user)."""
