"""Grounding: spans always index the text they claim to."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agefacts.ground import locate


def test_exact_match_wins_and_first_occurrence_is_taken():
    span = locate("I live in Lyon. I live in Lyon.", "I live in Lyon")
    assert (span.char_start, span.char_end, span.match) == (0, 14, "exact")


def test_whitespace_runs_are_tolerated_and_mapped_back_to_the_original():
    text = "We moved\n   to  Oslo in June"
    span = locate(text, "We moved to Oslo")
    assert span.match == "whitespace"
    assert span.quote == "We moved\n   to  Oslo" == text[span.char_start : span.char_end]


def test_typographic_quotes_and_dashes_fold_to_ascii():
    text = "My club – “The Page Turners” – meets at Zoë’s"
    span = locate(text, 'My club - "The Page Turners"')
    assert span.match == "typography"
    assert span.quote == "My club – “The Page Turners”"
    assert locate(text, "at Zoë's").quote == "at Zoë’s"


def test_case_is_never_folded_and_paraphrase_is_not_found():
    assert locate("moved to Dublin", "moved to dublin") is None
    assert locate("I speak English at work", "I use English for my job") is None


def test_blank_quotes_are_not_found():
    assert locate("anything", "") is None
    assert locate("anything", "   ") is None


def test_byte_offsets_count_utf8_bytes():
    text = "Begoña lives in Logroño 🇪🇸 ok"
    span = locate(text, "Logroño 🇪🇸")
    data = text.encode("utf-8")
    assert data[span.byte_start : span.byte_end].decode("utf-8") == "Logroño 🇪🇸"
    assert span.byte_end - span.byte_start == len("Logroño 🇪🇸".encode())


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1), st.data())
def test_any_substring_is_found_with_agreeing_char_and_byte_spans(text, data):
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    quote = text[start:end]
    span = locate(text, quote)
    if not quote.strip():
        assert span is None
        return
    assert span is not None
    assert text[span.char_start : span.char_end] == span.quote
    assert text.encode("utf-8")[span.byte_start : span.byte_end] == span.quote.encode("utf-8")
    assert span.byte_start == len(text[: span.char_start].encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs")), min_size=1, max_size=8),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from([" ", "\n", "\t ", "  \n  ", "\u00a0"]), min_size=6, max_size=6),
)
def test_reflowed_quotes_are_found_in_the_original(words, gaps):
    text = "".join(w + gaps[i] for i, w in enumerate(words)).rstrip()
    quote = " ".join(words)
    span = locate(text, quote)
    assert span is not None
    assert span.quote == text[span.char_start : span.char_end]
    assert " ".join(span.quote.split()) == " ".join(quote.split())


# -- composed and decomposed Unicode -----------------------------------------------------------------
def test_a_quote_in_composed_unicode_is_found_in_decomposed_text():
    """Text typed on some systems (macOS, Korean input) comes decomposed (NFD: "u" then a
    combining diaeresis), while a model writes it composed (NFC): the same words, so found,
    and what is stored is the message's own text at the span."""
    import unicodedata

    nfd = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
    for said, quote in [
        ("I moved to Zürich last May.", "moved to Zürich"),
        ("Tôi sống ở Hà Nội từ năm ngoái.", "sống ở Hà Nội"),
        ("저는 서울에 살아요.", "서울에 살아요"),
        ("Ångström worked at Uppsala.", "Ångström"),
    ]:
        text = nfd(said)
        span = locate(text, quote)
        assert span is not None, (said, quote)
        assert span.quote == text[span.char_start : span.char_end]
        assert unicodedata.normalize("NFC", span.quote) == quote
        assert span.match == "typography"
        # And the other way round: decomposed quote, composed text.
        back = locate(said, nfd(quote))
        assert back is not None and back.quote == quote


# Letters as a message holds them: ASCII, accented (one or two marks), Hangul syllables, a
# singleton that composition replaces (the Angstrom sign), and spaces.
_CLUSTERS = ["a", "b", "Z", " ", "  ", ",", "é", "ü", "Å", "\u212b", "ệ", "ñ", "한", "국", "어", "ő", "ﬁ"]
_INVISIBLE = ["\u200e", "\u200f", "\u00ad", "\u200b", "\u2060"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_CLUSTERS), min_size=1, max_size=20), st.data())
def test_any_run_of_letters_is_found_whichever_normal_form_each_side_is_in(clusters, data):
    """Also with invisible format characters in the message after letters, which the quote
    leaves out."""
    import unicodedata

    i = data.draw(st.integers(0, len(clusters) - 1))
    j = data.draw(st.integers(i + 1, len(clusters)))
    form_text, form_quote = data.draw(st.sampled_from(["NFC", "NFD"])), data.draw(st.sampled_from(["NFC", "NFD"]))
    sub = "".join(clusters[i:j])
    if not sub.strip():
        return
    marked = [c + data.draw(st.sampled_from(["", "", *_INVISIBLE])) for c in clusters]
    haystack = unicodedata.normalize(form_text, "".join(marked))
    span = locate(haystack, unicodedata.normalize(form_quote, sub))
    assert span is not None, (haystack, sub)
    assert span.quote == haystack[span.char_start : span.char_end]
    assert haystack.encode("utf-8")[span.byte_start : span.byte_end] == span.quote.encode("utf-8")
    seen = "".join(c for c in span.quote if c not in _INVISIBLE)
    assert unicodedata.normalize("NFC", " ".join(seen.split())) == unicodedata.normalize("NFC", " ".join(sub.split()))


def test_invisible_format_characters_do_not_hide_a_quote():
    """Chat exports carry invisible format characters (WhatsApp's left-to-right marks, soft
    hyphens, zero-width spaces and joiners, a byte order mark) that a model leaves out of its
    quote: the words are found, and the stored quote is the message's text, marks and all."""
    for said, quote in [
        ("\u200e[12/03/24] Ana: I live in \u200eLyon\u200f now.", "I live in Lyon now"),
        ("\ufeffMy son Ali is a co\u00adoperative kid.", "My son Ali is a cooperative kid"),
        ("أنا أعيش في \u200fعمّان\u200f الآن", "أعيش في عمّان"),
        ("I work at Acme\u200b Corp.", "work at Acme Corp"),
    ]:
        span = locate(said, quote)
        assert span is not None, (said, quote)
        assert span.quote == said[span.char_start : span.char_end]
        assert "".join(c for c in span.quote if c not in "\u200e\u200f\u00ad\u200b\ufeff") == quote
        assert span.match == "typography"
