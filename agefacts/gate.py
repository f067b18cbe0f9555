"""The gate: decides which of a model's proposals become data.

A refusal is a :class:`~agefacts.models.Rejection` with a reason code, never an exception:
most messages assert nothing, and a turn whose every claim was refused is an ordinary result.
Reasons, in the order they are checked:

- ``invalid``: the model's item was not the shape of a claim, entity or follow-up
- ``unknown_entity_type``: an entity's type is not in the ontology
- ``handle_conflict``: a handle already given to an entity of another type is declared again
  (a model reusing "e1" for a new entity); the new declaration, and what its turn says of the
  handle, are refused rather than merged into the earlier entity
- ``no_polarity`` / ``no_tense``: the model did not say; an unanswered polarity is not "asserted"
- ``unknown_predicate``: not in the closed vocabulary
- ``unknown_handle``: subject or object names no entity of this conversation
- ``unresolvable_subject``: the subject is a term like "it" or "someone"
- ``object_expected`` / ``value_expected``: the predicate takes the other kind of object
- ``subject_type`` / ``object_type``: the predicate's type signature does not allow it
- ``invalid_time``: valid_from, valid_until or recurrence is not a valid time or RRULE
- ``not_a_number``: the predicate takes a number (``number: true``) and the value is none, in
  digits or in words
- ``polarity`` / ``tense``: the policy does not admit it (past and future are admitted when the
  ontology's ``dated_tenses`` allows it and the statement carries its own validity)
- ``not_in_message``: the quote cannot be found in the message

Keyphrases (:func:`gate_keyphrases`) are grounded by the same search as quotes and refused as
``not_in_message`` when their words are not in the message, or ``no_words`` when they hold no
word at all; one phrase said twice in a message is one keyphrase, with its best score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .errors import TimeError
from .ground import locate
from .keys import keyphrase_text
from .models import (
    AUTHORED,
    Claim,
    Entity,
    Evidence,
    Fact,
    Followup,
    Keyphrase,
    KeyphraseHit,
    Proposal,
    Rejection,
    TurnResult,
)
from .names import USER, is_identifier
from .ontology import Ontology
from .temporal import normalise_instant, normalise_rrule, normalise_valid

__all__ = [
    "as_number",
    "gate_keyphrases",
    "gate_turn",
    "normalise_value",
]


_INT64 = (-(2**63), 2**63 - 1)


def normalise_value(value: object) -> object:
    """Literal values are stored normalised: text in Unicode NFC with whitespace runs
    collapsed, case kept. A whole-number float is the integer it equals (``30.0`` is ``30``):
    this is the one rule of value identity, so that the statement key, the stored value, the
    engine's Cypher equality and :func:`agefacts.derive.value_ident` all find one value where a
    person does. Other floats stay floats (negative zero is zero). The stored value is a
    function of the statement's key, whatever conversation said it. A number AGE cannot hold
    raises ValueError: an integer outside 64 bits, or a float that is not finite."""
    import unicodedata

    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split())
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"the number {value} is not finite; AGE stores finite numbers only")
        if not value.is_integer():
            return value
        value = int(value)  # 30.0 is 30; -0.0 is 0
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        raise ValueError(f"the number {value} does not fit in 64 bits, which is what AGE holds; give it as text")
    return value


_UNITS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}


def as_number(value: object) -> int | float | None:
    """A number-valued predicate's value as the number it is: a number stays, digits are read
    ("30", "2.5"), and an English number in words is its digits ("thirty", "thirty-five",
    "one hundred and two", "a hundred"); None when it is no number. So 30 said once as a
    number and once as "thirty" is one value, told twice."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip().casefold()
    try:
        number = float(text.replace(",", "")) if text else None
    except ValueError:
        number = None
    if number is not None:
        try:
            whole = normalise_value(number)
        except ValueError:  # not finite, or past what AGE holds
            return None
        return whole if isinstance(whole, int | float) else None
    words = [w for w in text.replace("-", " ").split() if w != "and"]
    if not words:
        return None
    total = current = 0
    seen = False
    for w in words:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "a" and not seen:
            current = 1
        elif w in _SCALES:
            current = max(current, 1) * _SCALES[w]
            if _SCALES[w] > 100:
                total, current = total + current, 0
        else:
            return None
        seen = True
    return total + current


def _nearest(predicate: str, ontology: Ontology) -> str:
    """The ontology's predicates nearest a word it does not have, for a sentence."""
    near = ontology.nearest_predicates(predicate)
    return (
        f" (did you mean {', '.join(near)}? `agefacts ontology` lists them all)"
        if near
        else " (`agefacts ontology` lists them)"
    )


def gate_turn(
    turn: int,
    text: str,
    at: str | None,
    proposal: Proposal,
    ontology: Ontology,
    known: Mapping[str, Entity],
) -> TurnResult:
    """Ground and gate one user turn's proposal.

    ``known`` holds the entities of earlier turns by handle (this turn's entities are added to
    it here, so a statement may name an entity introduced in the same turn)."""
    rejected: list[Rejection] = []
    entities: list[Entity] = []
    types = set(ontology.entity_types)
    at_norm = normalise_instant(at) if at else None

    for bad in proposal.invalid:
        rejected.append(Rejection(turn=turn, kind=bad.kind, reason="invalid", detail=bad.reason, item=bad.item))

    handles: dict[str, Entity] = dict(known)
    # Handle -> (reason, why) for the statements of this turn that name it.
    refused_handles: dict[str, tuple[str, str]] = {}
    for ent in proposal.entities:
        if ent.type not in types:
            rejected.append(
                _rej(
                    turn,
                    "entity",
                    "unknown_entity_type",
                    f"entity type {ent.type!r} is not in the ontology (its types: {', '.join(ontology.entity_types)})",
                    ent,
                )
            )
            refused_handles[ent.handle] = ("unknown_entity_type", "is an entity whose type was refused")
            continue
        earlier = handles.get(ent.handle)
        if earlier is not None and earlier.type != ent.type:
            why = (
                f"handle {ent.handle!r} is the {earlier.type} {earlier.name or earlier.mention!r} already; "
                f"declared again as the {ent.type} {ent.name or ent.mention!r}"
            )
            rejected.append(_rej(turn, "entity", "handle_conflict", why, ent))
            refused_handles[ent.handle] = ("handle_conflict", f"is {why}")
            continue
        bad_attrs = sorted(k for k in ent.attrs if not is_identifier(k))
        if bad_attrs:
            # The attribute names become map keys in the graph; the entity itself is fine.
            rejected.append(
                _rej(turn, "entity", "invalid", f"attribute names {bad_attrs} are not identifiers; dropped", ent)
            )
            ent = ent.model_copy(update={"attrs": {k: v for k, v in ent.attrs.items() if is_identifier(k)}})
        if ent.handle == USER:
            rejected.append(
                _rej(turn, "entity", "invalid", "the handle 'user' is reserved for the person speaking", ent)
            )
            continue
        entities.append(ent)
        handles[ent.handle] = ent

    facts: list[Fact] = []
    for claim in proposal.statements:
        fact = _gate_claim(turn, text, at_norm, claim, ontology, handles, refused_handles, rejected)
        if fact is not None:
            facts.append(fact)

    followups: list[Followup] = []
    for f in proposal.followups:
        if f.handle != USER and f.handle not in handles:
            rejected.append(_rej(turn, "followup", "unknown_handle", f"gap {f.gap!r} names no known entity", f))
            continue
        followups.append(f)

    return TurnResult(turn=turn, entities=entities, statements=facts, followups=followups, rejected=rejected)


def gate_keyphrases(turn: int, text: str, keyphrases: list[Keyphrase]) -> tuple[list[KeyphraseHit], list[Rejection]]:
    """Ground one message's keyphrases: each is found in ``text`` (the first place its words
    are, as a quote is), keyed by its words; of one phrase proposed twice the higher score is
    kept (the first, when the scores tie)."""
    hits: dict[str, KeyphraseHit] = {}
    rejected: list[Rejection] = []
    for kp in keyphrases:
        words = keyphrase_text(kp.mention)
        if not words:
            rejected.append(_rej(turn, "keyphrase", "no_words", f"{kp.mention!r} holds no word", kp))
            continue
        span = locate(text, kp.mention)
        if span is None:
            rejected.append(_rej(turn, "keyphrase", "not_in_message", f"{kp.mention!r} is not in the message", kp))
            continue
        old = hits.get(words)
        if old is not None and old.score >= kp.score:
            continue
        hits[words] = KeyphraseHit(
            turn=turn,
            text=words,
            mention=span.quote,
            **span.offsets(),
            score=kp.score,
            extractor=kp.extractor or AUTHORED,
        )
    return sorted(hits.values(), key=lambda h: h.text), rejected


def _rej(turn: int, kind: str, reason: str, detail: str, item: object) -> Rejection:
    dumped = item.model_dump(mode="json", exclude_none=True) if hasattr(item, "model_dump") else item
    return Rejection(turn=turn, kind=kind, reason=reason, detail=detail, item=dumped)  # type: ignore[arg-type]


def _type_of(handle: str, handles: Mapping[str, Entity], ontology: Ontology) -> str:
    return ontology.user_type if handle == USER else handles[handle].type


def _gate_claim(
    turn: int,
    text: str,
    at: str | None,
    c: Claim,
    ontology: Ontology,
    handles: Mapping[str, Entity],
    refused: Mapping[str, tuple[str, str]],
    rejected: list[Rejection],
) -> Fact | None:
    def no(reason: str, detail: str) -> Fact | None:
        rejected.append(_rej(turn, "statement", reason, detail, c))
        return None

    # An empty answer is refused, not defaulted: a claim nobody decided the polarity of
    # would otherwise be stored as true.
    if c.polarity is None:
        return no("no_polarity", "the model gave no polarity (asserted, negated, hedged, hypothetical, reported)")
    if c.tense is None:
        return no("no_tense", "the model gave no tense (current, past, future)")
    spec = ontology.predicate(c.predicate)
    if spec is None:
        return no(
            "unknown_predicate",
            f"predicate {c.predicate!r} is not in the ontology's vocabulary{_nearest(c.predicate, ontology)}",
        )
    for side, h in (("subject", c.subject), ("object", c.object)):
        if h is None or h == USER:
            continue
        if h in refused:
            reason, why = refused[h]
            return no(reason, f"{side} {h!r} {why}")
        if h not in handles:
            return no("unknown_handle", f"{side} handle {h!r} names no entity of this conversation")
    subject_terms = {c.subject.casefold()}
    if c.subject in handles:
        subj = handles[c.subject]
        subject_terms |= {subj.mention.strip().casefold()}
        if subj.name:
            subject_terms.add(subj.name.strip().casefold())
    if (
        c.subject != USER
        and (subject_terms & ontology.unresolvable())
        and not (c.subject in handles and handles[c.subject].resolved)
    ):
        return no("unresolvable_subject", f"subject {c.subject!r} is a term that cannot name anyone")
    if c.object is not None and not spec.takes_object:
        return no("value_expected", f"predicate {spec.name!r} takes a literal value, not an entity")
    if c.value is not None and not spec.takes_value:
        return no("object_expected", f"predicate {spec.name!r} takes an entity as its object, not a literal")
    st = _type_of(c.subject, handles, ontology)
    if spec.subject is not None and st not in spec.subject:
        return no("subject_type", f"{spec.name!r} takes a subject of type {'|'.join(spec.subject)}, not {st}")
    if c.object is not None and spec.object is not None:
        ot = _type_of(c.object, handles, ontology)
        if ot not in spec.object:
            return no("object_type", f"{spec.name!r} takes an object of type {'|'.join(spec.object)}, not {ot}")
    times: dict[str, str | None] = {}
    for field, norm in (
        ("valid_from", normalise_valid),
        ("valid_until", normalise_valid),
        ("recurrence", normalise_rrule),
    ):
        raw = getattr(c, field)
        try:
            times[field] = norm(raw) if raw is not None else None
        except TimeError as exc:
            return no("invalid_time", f"{field} {raw!r} {exc}")
    if times["valid_from"] and times["valid_until"] and times["valid_until"] <= times["valid_from"]:
        # An interval that ends where it starts holds at no time (ends are exclusive).
        return no("invalid_time", f"valid_until {times['valid_until']} is not after valid_from {times['valid_from']}")
    if c.confidence is not None and not 0 <= c.confidence <= 1:
        return no("invalid", f"confidence {c.confidence} is not between 0 and 1")
    try:
        value = normalise_value(c.value)
    except ValueError as exc:
        return no("invalid", f"value: {exc}")
    if spec.number and value is not None:
        number = as_number(value)
        if number is None:
            return no("not_a_number", f"predicate {spec.name!r} takes a number, and {value!r} is none")
        value = number
    confidence = None if c.confidence is None else c.confidence + 0.0  # no negative zero

    admit = ontology.admit
    ends = corrects = False
    if c.polarity not in admit.polarity:
        if c.polarity == "negated" and admit.negation_ends_validity and c.correction:
            ends = corrects = True  # "I'm not allergic to peanuts (it's tree nuts)" withdraws what was said
        elif c.polarity == "negated" and admit.negation_ends_validity and c.tense == "current":
            ends = True  # "I don't live in Amman any more" ends the matching fact
        elif c.polarity == "negated" and admit.negation_ends_validity and c.tense == "future":
            # "We're not moving to Riga after all": the plan said before is called off, so it
            # is taken back as a correction takes back what was said (it never came to hold),
            # where an end would close a run that starts only at the plan's date.
            ends = corrects = True
        else:
            return no("polarity", f"polarity {c.polarity!r} is not admitted as a fact")
    dated = any(times.values())
    if not corrects and c.tense not in admit.tense and not (c.tense in admit.dated_tenses and dated):
        hint = " without its own date or recurrence" if c.tense in admit.dated_tenses else ""
        return no("tense", f"tense {c.tense!r} is not admitted as a fact{hint}")

    span = locate(text, c.quote)
    if span is None:
        return no("not_in_message", f"the quote {c.quote!r} is not in the message")
    # Validated, though every field was just checked or computed: pydantic's validator builds
    # a model in half the time its model_construct does (a fifth of the gate's time went there).
    evidence = Evidence.model_validate(
        {"turn": turn, "quote": span.quote, **span.offsets(), "at": at, "confidence": confidence}
    )
    return Fact.model_validate(
        {
            "subject": c.subject,
            "predicate": c.predicate,
            "object": c.object,
            "value": value,
            "valid_from": times["valid_from"],
            "valid_until": times["valid_until"],
            "recurrence": times["recurrence"],
            "confidence": confidence,
            "tense": c.tense,
            "ends_validity": ends,
            "corrects": corrects,
            "evidence": (evidence,),
        }
    )
