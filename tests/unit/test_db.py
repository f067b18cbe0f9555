"""The connection layer against the real engine."""

from __future__ import annotations

import pytest

from agefacts.db import check_graph_name
from agefacts.errors import QueryError


@pytest.mark.parametrize("bad", ["ab", "1abc", "a-b", "facts; DROP", "", "x" * 64])
def test_graph_names_must_be_safe_identifiers(bad):
    with pytest.raises(QueryError, match="graph name"):
        check_graph_name(bad)
