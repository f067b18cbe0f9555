"""What a load did: each conversation's :class:`Outcome` (loaded, skipped or failed, with
what it wrote and what the gate refused) and the run's :class:`Summary`, in words and as
JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome", "Summary"]


@dataclass
class Outcome:
    source: str
    conversation: str | None
    namespace: str | None
    status: str  # loaded | skipped | failed
    reason: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    # The keys written, by kind (entities, statements, evidence): a run's totals count each
    # once, as the graph holds it, however many conversations wrote it.
    written: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)
    # What did not become data: (turn, kind, reason, sentence), as the gate said it.
    rejections: list[tuple[int, str, str, str]] = field(default_factory=list, repr=False)


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def totals(self) -> dict[str, int]:
        """What the run wrote: entities, statements and evidence by distinct key (what the
        graph holds of them), the rest summed; ``claims`` is how many claims were admitted,
        ``repeated`` how many of them said a statement another claim of the run said too."""
        loaded = [o for o in self.outcomes if o.status == "loaded"]
        out = {}
        for kind in ("entities", "statements", "evidence"):
            out[kind] = len(frozenset().union(*(o.written.get(kind, frozenset()) for o in loaded)))
        for kind in ("claims", "rejected", "followups", "keyphrases", "unextracted"):
            out[kind] = sum(o.counts.get(kind, 0) for o in loaded)
        out["repeated"] = max(0, out["claims"] - out["statements"])
        return out

    def rejected_reasons(self) -> dict[str, int]:
        """How many claims (entities, follow-ups, keyphrases) the loaded conversations had
        refused, by reason."""
        out: Counter[str] = Counter()
        for o in self.outcomes:
            if o.status == "loaded":
                out.update(o.counts.get("rejected_reasons", {}))
        return dict(sorted(out.items()))

    def rejections(self) -> list[dict[str, Any]]:
        """Each refused claim of the loaded conversations, with where it was and why."""
        return [
            {"source": o.source, "namespace": o.namespace, "conversation": o.conversation, "turn": turn, "kind": kind}
            | {"reason": reason, "detail": detail}
            for o in self.outcomes
            if o.status == "loaded"
            for turn, kind, reason, detail in o.rejections
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "loaded": self.count("loaded"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            **self.totals(),
            "rejected_reasons": self.rejected_reasons(),
            "rejections": self.rejections(),
            "people": self.people(),
            "failures": [{"source": o.source, "conversation": o.conversation, "reason": o.reason} for o in self.failed],
        }

    def people(self) -> list[str]:
        """Who is who in what was loaded: a name met in several conversations, one person (with
        a role in some and none in others: "my brother Ravi", then "Ravi"), and a role that
        names several people, kept apart ("my sister Ana", "my sister Rita")."""
        # By (namespace, key): the name, and the role each conversation named them with (None: none).
        named: dict[tuple[str, str], tuple[str, dict[str, str | None]]] = {}
        apart: dict[tuple[str, str], set[str]] = {}
        for o in self.outcomes:
            if o.status != "loaded":
                continue
            people = o.counts.get("people") or {}
            for k, (name, rel) in people.get("named", {}).items():
                named.setdefault((o.namespace or "", k), (name, {}))[1][o.conversation or ""] = rel
            for rel, names in people.get("apart", {}).items():
                apart.setdefault((o.namespace or "", rel), set()).update(names)
        lines = []
        for (ns, _), (name, by_conv) in sorted(named.items(), key=lambda x: (x[0][0], x[1][0])):
            roles = set(by_conv.values())
            if None in roles and len(roles) > 1:
                role = ", ".join(sorted(r for r in roles if r))
                lines.append(
                    f"one person: {name!r} of namespace {ns!r}, named with a role ({role}) "
                    f"and without one, in {len(by_conv)} conversations"
                )
        for (ns, rel), names in sorted(apart.items()):
            lines.append(
                f"several people with one role: {', '.join(repr(n) for n in sorted(names))} "
                f"of namespace {ns!r} are each {rel}"
            )
        return lines

    def text(self, show_rejections: bool = False) -> str:
        """What the run did; each refused claim's sentence too with ``show_rejections`` (the
        counts by reason are always there)."""
        t = self.totals()
        lines = [
            f"conversations: {self.count('loaded')} loaded, {self.count('skipped')} skipped (unchanged), "
            f"{self.count('failed')} failed",
            f"written: {t['entities']} entities, {t['statements']} statements"
            + (f" ({t['repeated']} claims said a statement again)" if t["repeated"] else "")
            + f", {t['evidence']} evidence, {t['rejected']} rejected claims, {t['followups']} follow-ups"
            + (f", {t['keyphrases']} keyphrases" if t["keyphrases"] else ""),
        ]
        if t["unextracted"]:
            lines.append(
                f"{t['unextracted']} user message(s) carry no extraction: they are stored and `agefacts ask` finds "
                "them by their words, but no fact is read from them until one is recorded (`agefacts extract FILES "
                "--out DIR --llm-url URL --model NAME`, then load DIR; or write statements by hand: docs/extract.md)"
            )
        lines.extend(self.people())
        reasons = self.rejected_reasons()
        if reasons:
            lines.append(
                "rejected by reason: "
                + ", ".join(f"{r} {n}" for r, n in reasons.items())
                + (
                    ""
                    if show_rejections
                    else " (`agefacts load` of the same files with --force --show-rejections says each one, and why)"
                )
            )
        if show_rejections:
            for r in self.rejections():
                lines.append(
                    f"rejected {r['conversation']} turn {r['turn']} ({r['kind']}, {r['reason']}): {r['detail']}"
                )
        # A reason shared by many conversations (the connection was lost) is said once.
        shared = Counter(o.reason for o in self.failed)
        said: set[str | None] = set()
        for o in self.failed:
            if shared[o.reason] > 3:
                if o.reason not in said:
                    said.add(o.reason)
                    lines.append(f"FAILED {shared[o.reason]} conversations, from {o.source} on: {o.reason}")
                continue
            who = f" (conversation {o.conversation!r})" if o.conversation else ""
            reason = o.reason or ""
            # Input errors name their place themselves (they are raised without the summary).
            if reason.startswith(o.source + ":") or reason.startswith(o.source + " "):
                reason = reason[len(o.source) :].lstrip(": ")
            lines.append(f"FAILED {o.source}{who}: {reason}")
        return "\n".join(lines)
