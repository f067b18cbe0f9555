"""What Memory.add makes of new messages before anything is asked or loaded (no engine)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agefacts.adding import extended
from agefacts.errors import InputError, UsageError

from ..helpers import conversation, user_turn


def _stored():
    return conversation(
        "c",
        [
            user_turn("I live in Porto.", "2026-03-01T10:00:00Z"),
            {"speaker": "assistant", "text": "Nice."},
        ],
        namespace="rui",
    )


def test_new_messages_are_appended_and_recordings_kept():
    conv = extended(_stored(), [{"role": "user", "content": "I love fado."}], "rui", "c")
    assert [t.text for t in conv.turns] == ["I live in Porto.", "Nice.", "I love fado."]
    assert conv.turns[0].recorded is not None and conv.turns[2].recorded is None
    assert conv.turns[2].at is not None  # sent now


def test_the_whole_history_again_is_the_history_with_its_recordings():
    again = [
        {"role": "user", "content": "I live in Porto."},
        {"role": "assistant", "content": "Nice."},
        {"role": "user", "content": "I love fado.", "at": "2026-03-02T10:00:00Z"},
    ]
    conv = extended(_stored(), again, "rui", "c")
    assert [t.text for t in conv.turns] == ["I live in Porto.", "Nice.", "I love fado."]
    assert conv.turns[0].recorded is not None and conv.turns[0].at == "2026-03-01T10:00:00Z"


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20)


@given(st.lists(TEXT, max_size=6))
def test_the_history_sent_again_or_only_the_new_message_give_one_conversation(texts):
    first = [{"role": "user", "content": t, "at": f"2026-01-01T10:{i:02d}:00Z"} for i, t in enumerate(texts)]
    stored = extended(None, first, "n", "c")
    more = [{"role": "user", "content": "and then?", "at": "2026-01-02T10:00:00Z"}]
    resent = extended(stored, first + more, "n", "c")
    assert [t.text for t in resent.turns] == texts + ["and then?"]
    appended = extended(stored, more, "n", "c")
    assert [t.text for t in appended.turns] == texts + ["and then?"]


def test_bad_messages_are_refused_with_a_sentence():
    with pytest.raises(UsageError, match="a list of messages"):
        extended(None, "hello", "n", "c")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="'user' or 'assistant' .* not 'narrator'"):
        extended(None, [{"role": "narrator", "content": "x"}], "n", "c")
    with pytest.raises(UsageError, match="text .* is a string"):
        extended(None, [{"role": "user", "content": 42}], "n", "c")
    with pytest.raises(InputError, match="'at' 'not a time' is not an ISO-8601"):
        extended(None, [{"role": "user", "content": "hi", "at": "not a time"}], "n", "c")
    with pytest.raises(InputError, match="namespace: String should have at most 200 characters"):
        extended(None, [{"role": "user", "content": "hi"}], "n" * 300, "c")
    with pytest.raises(UsageError, match="namespace= .* and conversation="):
        extended(None, [{"role": "user", "content": "hi"}], None, "c")


def test_a_chat_api_history_is_taken_as_it_is_sent():
    """The message list an assistant sends to a chat API: a system prompt first, content in
    parts, tool calls and their results. The person's and the assistant's words are the
    conversation; the rest is passed over, so the same list sent again is the same history."""
    sent = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": [{"type": "text", "text": "I live in Porto."}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "t1", "content": '{"weather": "sun"}'},
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny "}, {"type": "text", "text": "there."}]},
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}]},
    ]
    conv = extended(None, sent, "rui", "c")
    assert [(t.speaker, t.text) for t in conv.turns] == [("user", "I live in Porto."), ("assistant", "Sunny there.")]
    more = sent + [{"role": "user", "content": "I love fado."}]
    again = extended(conv, more, "rui", "c")
    assert [t.text for t in again.turns] == ["I live in Porto.", "Sunny there.", "I love fado."]
    assert again.turns[0].at == conv.turns[0].at  # the history, not new messages


def test_the_history_sent_again_with_its_times_spelled_otherwise_is_still_the_history():
    """A time sent as "…Z" the first time and as a datetime ("…+00:00") or in another zone the
    next is the same instant: the history is recognised, not appended a second time."""
    import datetime as dt

    first = [{"role": "user", "content": "I live in Porto.", "at": "2026-03-01T10:00:00Z"}]
    stored = extended(None, first, "rui", "c")
    again = [
        {
            "role": "user",
            "content": "I live in Porto.",
            "at": dt.datetime(2026, 3, 1, 11, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        },
        {"role": "user", "content": "I love fado.", "at": "2026-03-02T10:00:00.250Z"},
    ]
    conv = extended(stored, again, "rui", "c")
    assert [t.text for t in conv.turns] == ["I live in Porto.", "I love fado."]
