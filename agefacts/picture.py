"""A picture of one entity: its statements and neighbours drawn as a graph.

Graphviz (``dot``) lays the graph out and writes SVG; the HTML page wraps that SVG with a
small panel that shows a statement's quote when its edge is clicked (hovering shows it too,
as the SVG tooltip). The page is self-contained: no script or style is fetched from anywhere.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import AgeFactsError, UsageError

if TYPE_CHECKING:
    from .db import Database

__all__ = [
    "Picture",
    "dot_source",
    "picture_of",
    "render_html",
    "render_svg",
]


def _q(text: Any) -> str:
    """A DOT double-quoted string; backslashes are escaped so no escape sequence survives."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + s.replace("\r", "").replace("\n", "\\n") + '"'


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def dot_source(entity: dict[str, Any], facts: list[dict[str, Any]]) -> str:
    """The DOT text for an entity and its facts (subject or object), in a stable order."""
    center = entity["key"]
    lines = [
        "digraph agefacts {",
        '  graph [rankdir=LR, bgcolor="white", fontname="Helvetica", pad=0.3, nodesep=0.3, ranksep=1.2];',
        '  node [fontname="Helvetica", fontsize=11, shape=box, style="rounded,filled", fillcolor="#eef3fb", color="#5b7db1"];',
        '  edge [fontname="Helvetica", fontsize=10, color="#7a869a"];',
        f'  {_q(center)} [label={_q(entity.get("name") or center)}, fillcolor="#ffd97a", color="#b8860b", penwidth=2, '
        f"tooltip={_q(entity.get('type') or '')}];",
    ]
    nodes: set[str] = {center}
    for i, f in enumerate(
        sorted(facts, key=lambda f: (f["predicate"], str(f.get("object") or f.get("value")), f["statement"]))
    ):
        tip = f"“{f['quote']}” ({f['conversation']}, message {f['message']})"
        times = ", ".join(
            x
            for x in (
                f.get("valid_from") and f"from {f['valid_from']}",
                f.get("valid_until") and f"until {f['valid_until']}",
            )
            if x
        )
        if times:
            tip += f" [{times}]"
        subject_key = f.get("subject_key") or center
        if subject_key not in nodes:
            nodes.add(subject_key)
            lines.append(
                f"  {_q(subject_key)} [label={_q(_short(str(f['subject'])))}, tooltip={_q(f.get('subject_type') or '')}];"
            )
        if f.get("object_key"):
            target = f["object_key"]
            if target not in nodes:
                nodes.add(target)
                lines.append(
                    f"  {_q(target)} [label={_q(_short(str(f['object'])))}, tooltip={_q(f.get('object_type') or '')}];"
                )
        else:
            target = f"value:{i}"
            lines.append(
                f'  {_q(target)} [label={_q(_short(str(f["value"])))}, shape=note, fillcolor="#f4f4f4", color="#999999"];'
            )
        lines.append(
            f"  {_q(subject_key)} -> {_q(target)} [label={_q(f['predicate'])}, tooltip={_q(tip)}, labeltooltip={_q(tip)}, "
            f"id={_q('fact-' + str(i))}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot: str) -> str:
    exe = shutil.which("dot")
    if not exe:
        raise AgeFactsError(
            "drawing needs Graphviz's `dot` on PATH: install graphviz (for example `apt-get install graphviz`)"
        )
    proc = subprocess.run([exe, "-Tsvg"], input=dot.encode("utf-8"), capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise AgeFactsError(f"Graphviz failed: {proc.stderr.decode(errors='replace').strip()}")
    svg = proc.stdout.decode("utf-8")
    return svg[svg.find("<svg") :]


def render_html(entity: dict[str, Any], facts: list[dict[str, Any]], svg: str) -> str:
    name = html.escape(entity.get("name") or entity["key"])
    rows = "\n".join(
        f'<li id="q-{i}"><b>{html.escape(str(f["subject"]))}</b> {html.escape(f["predicate"])} '
        f"<b>{html.escape(str(f.get('object') or f.get('value')))}</b>: “{html.escape(f['quote'])}” "
        f"<small>({html.escape(str(f['conversation']))})</small></li>"
        for i, f in enumerate(
            sorted(facts, key=lambda f: (f["predicate"], str(f.get("object") or f.get("value")), f["statement"]))
        )
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{name}: agefacts</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1.5rem; color: #1d2433; }}
h1 {{ font-size: 1.4rem; margin: 0 0 .3rem; }}
.meta {{ color: #5d6778; margin-bottom: 1rem; }}
#quote {{ min-height: 1.5rem; padding: .5rem .8rem; background: #fff8e1; border-left: 4px solid #b8860b; margin: .8rem 0; }}
svg {{ max-width: 100%; height: auto; }}
g.edge {{ cursor: pointer; }}
li {{ margin: .2rem 0; }}
</style>
</head>
<body>
<h1>{name}</h1>
<div class="meta">{html.escape(entity.get("type") or "")} · namespace {html.escape(entity.get("namespace") or "")} · {len(facts)} fact{"s" if len(facts) != 1 else ""}</div>
<div id="quote">Click an arrow to see the words it was read from.</div>
{svg}
<ol>
{rows}
</ol>
<script>
document.querySelectorAll('g.edge').forEach(function (edge) {{
  edge.addEventListener('click', function () {{
    var t = edge.querySelector('a') ? edge.querySelector('a').getAttribute('xlink:title') : null;
    if (!t) {{ var title = edge.querySelector('title'); t = title ? title.textContent : ''; }}
    document.getElementById('quote').textContent = t;
  }});
}});
</script>
</body>
</html>
"""


@dataclass(frozen=True)
class Picture:
    """An entity drawn with its facts: ``text`` is the SVG, or an HTML page around it."""

    entity: dict[str, Any]
    facts: list[dict[str, Any]]
    text: str


def picture_of(
    db: Database,
    entity: str,
    *,
    namespace: str | None = None,
    valid_at: str | None = None,
    known_at: str | None = None,
    html_page: bool = True,
) -> Picture:
    """Find one entity by key, name or mention and draw it with its facts as of the two times."""
    from . import reads

    found = reads.find_entities(db, entity, namespace)
    if not found:
        raise AgeFactsError(f"no entity {entity!r}: give a key, a name or a mention")
    if len(found) > 1:
        keys = ", ".join(f"{e['key']} ({e['namespace']}, {e['name']})" for e in found)
        raise UsageError(f"{entity!r} names {len(found)} entities; pick one by key or --namespace: {keys}")
    rows = reads.facts(db, found[0]["key"], valid_at=valid_at, known_at=known_at).dicts()
    svg = render_svg(dot_source(found[0], rows))
    return Picture(found[0], rows, render_html(found[0], rows, svg) if html_page else svg)
