// Facts about one entity (as subject or object), valid at a time and as known at a time, each with the earliest quote it was read from.
// params: entity (an entity key), valid_at (a valid time), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, valid_until, recorded_at, superseded_at, recurrence, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at
// A statement is visible when it was recorded by known_at and valid_at falls in its validity as
// known at known_at: the closed interval once its supersession is known, the stated one before.
// A statement starts at valid_from, or at valid_start where supersession inferred one (an undated
// value that follows another).
// Two parts, UNION ALL: the entity as subject, then as object, each walking typed edges from the
// entity's key (index scans), so the cost does not grow with the graph. (Collecting both sides'
// statement keys and matching them again by key let a server's planner, given statistics,
// hash-join a scan of the whole Statement label: 270 ms at 100k statements against 10 ms.)
// The object side reaches the statement from the entity before its subject, for the same reason.
// The rows come unordered (agefacts.query sorts them: predicate, valid_from, recorded_at, key).
// The earliest evidence is the least [at, key, quote, ...] list: its at and unique key decide.
// The times are bound to variables before the validity test.
MATCH (x) WHERE x.k = $entity
MATCH (x)-[:SUBJECT_OF]->(s:Statement)
WITH x AS subj, s, $valid_at AS valid_at, $known_at AS known_at
WHERE s.ends_fact IS NULL AND s.recorded_at <= known_at
  AND coalesce(s.valid_from, s.valid_start, '') <= valid_at
  AND (s.valid_until IS NULL OR valid_at < s.valid_until OR (s.valid_until_inferred = true AND s.superseded_at > known_at))
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH known_at, subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.superseded_at <= known_at THEN s.valid_until WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS valid_until, s.recorded_at AS recorded_at, CASE WHEN s.superseded_at <= known_at THEN s.superseded_at ELSE null END AS superseded_at, s.recurrence AS recurrence, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at
UNION ALL
MATCH (x) WHERE x.k = $entity
MATCH (s:Statement)-[:ABOUT]->(x)
WITH s, x, $valid_at AS valid_at, $known_at AS known_at
WHERE s.ends_fact IS NULL AND s.recorded_at <= known_at
  AND coalesce(s.valid_from, s.valid_start, '') <= valid_at
  AND (s.valid_until IS NULL OR valid_at < s.valid_until OR (s.valid_until_inferred = true AND s.superseded_at > known_at))
MATCH (subj)-[:SUBJECT_OF]->(s)
WITH subj, s, x AS o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH known_at, subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.superseded_at <= known_at THEN s.valid_until WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS valid_until, s.recorded_at AS recorded_at, CASE WHEN s.superseded_at <= known_at THEN s.superseded_at ELSE null END AS superseded_at, s.recurrence AS recurrence, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at
