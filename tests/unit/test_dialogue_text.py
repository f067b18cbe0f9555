"""Real dialogue text: typographic apostrophes and quotes, ellipses, the engine's string
functions, and how a failure is reported."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agefacts.cypher import fold_quotes
from agefacts.ground import locate
from agefacts.keys import normalise_name
from agefacts.named import named_queries
from agefacts.typography import QUOTES


# -- 1. typographic apostrophes do not split entities ---------------------------------------------------
def test_the_named_entity_key_folds_typographic_apostrophes_and_quotes():
    assert normalise_name("Bloomingdale’s") == normalise_name("Bloomingdale's") == "bloomingdale's"
    assert normalise_name("“Acme”") == normalise_name('"Acme"')
    assert normalise_name("O‘Brien") == normalise_name("o'brien")


def test_the_entities_query_folds_what_typography_folds():
    text = named_queries()["entities"].text
    assert fold_quotes("toLower(x)") in text and fold_quotes("toLower($text)") in text
    assert set(QUOTES) <= {ch for ch in text if ord(ch) > 127}


# -- 2. an ellipsis typed as three dots ----------------------------------------------------------------------
def test_three_dots_find_an_ellipsis_and_the_stored_quote_is_the_message_text():
    span = locate("Well… I moved to Oslo… last year", "Well... I moved to Oslo")
    assert span is not None and span.match == "typography"
    assert span.quote == "Well… I moved to Oslo" and (span.char_start, span.char_end) == (0, 21)
    back = locate("Well... I moved to Oslo", "Well… I moved")
    assert back is not None and back.quote == "Well... I moved"
    assert locate("Well.. I moved", "Well… I moved") is None


@given(
    before=st.text(min_size=0, max_size=20),
    words=st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=8).filter(
            lambda w: "." not in w and "…" not in w
        ),
        min_size=1,
        max_size=4,
    ),
    after=st.text(min_size=0, max_size=20),
)
def test_any_ellipsis_retyped_as_dots_is_found_with_honest_spans(before, words, after):
    message = before + " " + "… ".join(words) + " " + after
    quote = "... ".join(words)
    span = locate(message, quote)
    assert span is not None
    assert message[span.char_start : span.char_end] == span.quote
    assert message.encode()[span.byte_start : span.byte_end] == span.quote.encode()


def test_no_shipped_query_uses_the_string_functions_the_embedded_engine_gets_wrong():
    for q in named_queries().values():
        low = q.text.lower()
        assert "substring(" not in low and "left(" not in low and "right(" not in low, q.name
