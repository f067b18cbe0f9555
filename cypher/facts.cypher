// Facts about one entity (as subject or object), valid at a time and as known at a time, each with the earliest quote it was read from.
// params: entity (an entity key), valid_at (a valid time), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, valid_until, recorded_at, superseded_at, recurrence, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at
// A statement is visible when it was recorded by known_at and valid_at falls in its validity as
// known at known_at: the closed interval once its supersession is known, the stated one before.
// It starts from the entity's key (an index scan) and walks its typed edges, so its cost does
// not grow with the size of the graph (an untyped edge pattern would scan every edge label).
// A statement starts at valid_from, or at valid_start where supersession inferred one (an undated
// value that follows another). The earliest evidence is the least [at, key, quote, ...] list: its
// at and unique key decide, and an ORDER BY before a grouping collect() is not kept. ORDER BY names no RETURN alias, which
// AGE before 1.7.0 cannot resolve.
// The times are bound to variables after the UNWIND, before the validity test (earlier costs 5x
// at 100k statements). AGE 1.6.0 crashes its backend on this query, so there agefacts runs
// facts_age16.cypher instead, which gives the same rows (a test holds the two equal).
MATCH (x) WHERE x.k = $entity
OPTIONAL MATCH (x)-[:SUBJECT_OF]->(s1:Statement)
WITH x, collect({s: s1.k, subj: x.k}) AS as_subject
OPTIONAL MATCH (subj2)-[:SUBJECT_OF]->(s2:Statement)-[:ABOUT]->(x)
WITH as_subject, collect({s: s2.k, subj: subj2.k}) AS as_object
UNWIND as_subject + as_object AS pair
WITH pair, $valid_at AS valid_at, $known_at AS known_at WHERE pair.s IS NOT NULL
MATCH (s:Statement) WHERE s.k = pair.s AND s.ends_fact IS NULL AND s.recorded_at <= known_at
MATCH (subj) WHERE subj.k = pair.subj
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, valid_at, known_at
WHERE coalesce(s.valid_from, s.valid_start, '') <= valid_at
  AND (s.valid_until IS NULL OR valid_at < s.valid_until OR (s.valid_until_inferred = true AND s.superseded_at > known_at))
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH known_at, subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.superseded_at <= known_at THEN s.valid_until WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS valid_until, s.recorded_at AS recorded_at, CASE WHEN s.superseded_at <= known_at THEN s.superseded_at ELSE null END AS superseded_at, s.recurrence AS recurrence, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at
ORDER BY s.predicate, s.valid_from, s.recorded_at, s.k
