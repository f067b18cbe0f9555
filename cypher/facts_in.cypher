// Every fact of one namespace (or of all, when namespace is null) that holds at a valid time as known at a known time: the demo's table.
// params: namespace (a namespace, or null for all), valid_at (a valid time), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, valid_until, recorded_at, superseded_at, recurrence, quote, conversation, message, char_start, char_end, said_at, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at, fact
// It reads the whole Fact label (or a namespace's share of it): for one entity, read
// facts_about instead.
MATCH (subj)-[:HOLDS]->(f:Fact)
WITH subj, f, $valid_at AS valid, $known_at AS known, $namespace AS ns
WHERE (ns IS NULL OR f.namespace = ns) AND f.known_from <= known AND (f.known_until IS NULL OR known < f.known_until) AND (f.valid_from IS NULL OR f.valid_from <= valid) AND (f.valid_until IS NULL OR valid < f.valid_until)
OPTIONAL MATCH (f)-[:OBJECT]->(o)
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, f.predicate AS predicate, f.value AS value, coalesce(o.name, o.k) AS object, f.valid_from AS valid_from, f.valid_until AS valid_until, f.recorded_at AS recorded_at, f.superseded_at AS superseded_at, f.recurrence AS recurrence, f.quote AS quote, f.conversation AS conversation, f.message AS message, f.char_start AS char_start, f.char_end AS char_end, f.said_at AS said_at, f.namespace AS namespace, f.statement AS statement, label(subj) AS subject_type, f.subject_key AS subject_key, label(o) AS object_type, f.object_key AS object_key, f.quoted_at AS quoted_at, f.k AS fact
