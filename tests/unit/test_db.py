"""The connection layer against the real engine."""

from __future__ import annotations

import pytest

from agefacts.db import check_graph_name
from agefacts.errors import QueryError


@pytest.mark.parametrize("bad", ["ab", "1abc", "a-b", "facts; DROP", "", "x" * 64])
def test_graph_names_must_be_safe_identifiers(bad):
    with pytest.raises(QueryError, match="graph name"):
        check_graph_name(bad)


def test_an_engine_started_by_an_earlier_install_in_the_same_cache_is_still_ours(tmp_path):
    """After an upgrade (other pinned npm packages, another install folder), the running
    engine was taken for a stranger: its state file was removed, `db stop` would not stop it,
    and every command said its port was taken by a server agefacts did not start."""
    from pathlib import Path

    from agefacts.engine import _earlier_install

    script = Path("node_modules/@electric-sql/pglite-socket/dist/scripts/server.js")
    cache = tmp_path / "cache"
    assert _earlier_install(str(cache / "engine-0123456789abcdef" / script), cache, script)
    assert not _earlier_install(str(tmp_path / "elsewhere" / "engine-0123" / script), cache, script)
    assert not _earlier_install(str(cache / "other" / script), cache, script)
    assert not _earlier_install(str(cache / "engine-0123" / "server.js"), cache, script)
