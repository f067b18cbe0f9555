// The facts about one entity that hold at a valid time as known at a known time: the fact versions (Fact) it holds or is the object of.
// params: entity (an entity key), valid_at (a valid time), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, valid_until, recorded_at, superseded_at, recurrence, quote, conversation, message, char_start, char_end, said_at, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at, fact
// facts, ask, show, Memory and MCP read these rows: the reading of time was done at load
// (agefacts.timeline.versions), so a fact is one vertex and "valid at T, as known at K" two
// interval tests on it. Two parts, UNION ALL: the entity as subject (HOLDS), then as object
// (OBJECT), each walking typed edges from the entity's key. A fact about the entity on both
// sides comes twice and is shown once. Parameters are bound to variables before they are
// compared (AGE 1.6.0 crashed its backend on $known_at in a WHERE).
MATCH (x) WHERE x.k = $entity
MATCH (x)-[:HOLDS]->(f:Fact)
WITH x AS subj, f, $valid_at AS valid, $known_at AS known
WHERE f.known_from <= known AND (f.known_until IS NULL OR known < f.known_until) AND (f.valid_from IS NULL OR f.valid_from <= valid) AND (f.valid_until IS NULL OR valid < f.valid_until)
OPTIONAL MATCH (f)-[:OBJECT]->(o)
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, f.predicate AS predicate, f.value AS value, coalesce(o.name, o.k) AS object, f.valid_from AS valid_from, f.valid_until AS valid_until, f.recorded_at AS recorded_at, f.superseded_at AS superseded_at, f.recurrence AS recurrence, f.quote AS quote, f.conversation AS conversation, f.message AS message, f.char_start AS char_start, f.char_end AS char_end, f.said_at AS said_at, f.namespace AS namespace, f.statement AS statement, label(subj) AS subject_type, f.subject_key AS subject_key, label(o) AS object_type, f.object_key AS object_key, f.quoted_at AS quoted_at, f.k AS fact
UNION ALL
MATCH (x) WHERE x.k = $entity
MATCH (f:Fact)-[:OBJECT]->(x)
WITH x AS o, f, $valid_at AS valid, $known_at AS known
WHERE f.known_from <= known AND (f.known_until IS NULL OR known < f.known_until) AND (f.valid_from IS NULL OR f.valid_from <= valid) AND (f.valid_until IS NULL OR valid < f.valid_until)
MATCH (subj)-[:HOLDS]->(f)
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, f.predicate AS predicate, f.value AS value, coalesce(o.name, o.k) AS object, f.valid_from AS valid_from, f.valid_until AS valid_until, f.recorded_at AS recorded_at, f.superseded_at AS superseded_at, f.recurrence AS recurrence, f.quote AS quote, f.conversation AS conversation, f.message AS message, f.char_start AS char_start, f.char_end AS char_end, f.said_at AS said_at, f.namespace AS namespace, f.statement AS statement, label(subj) AS subject_type, f.subject_key AS subject_key, label(o) AS object_type, f.object_key AS object_key, f.quoted_at AS quoted_at, f.k AS fact
