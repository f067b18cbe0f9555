"""What a load says about itself."""

from __future__ import annotations

from agefacts.summary import Outcome, Summary


def test_a_reason_many_conversations_share_is_said_once():
    lost = "not loaded: the database connection was lost (server closed the connection); run the same command again"
    outcomes = [Outcome(f"f{i}.json", f"c{i}", "ns", "loaded", counts={"statements": 1}) for i in range(3)]
    outcomes += [Outcome(f"g{i}.json", f"d{i}", "ns", "failed", lost) for i in range(1500)]
    outcomes += [Outcome("bad.json", "x", "ns", "failed", "bad.json: not valid JSON (...)")]
    text = Summary(outcomes).text()
    assert text.count(lost) == 1
    assert "FAILED 1500 conversations, from g0.json on: " + lost in text
    assert "FAILED bad.json (conversation 'x'): not valid JSON (...)" in text
    assert text.startswith("conversations: 3 loaded, 0 skipped (unchanged), 1501 failed")
