// The facts query (see facts.cypher) written for AGE 1.6: the same rows, slower (about 5x at 100k statements).
// params: entity (an entity key), valid_at (a valid time), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, valid_until, recorded_at, superseded_at, recurrence, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at
// A statement is visible when it was recorded by known_at and valid_at falls in its validity as
// known at known_at: the closed interval once its supersession is known, the stated one before.
// A statement starts at valid_from, or at valid_start where supersession inferred one (an undated
// value that follows another). The earliest evidence is the least [at, key, quote, ...] list: its
// at and unique key decide, and an ORDER BY before a grouping collect() is not kept. ORDER BY names no RETURN alias, which
// AGE before 1.7.0 cannot resolve.
// The times are bound to variables first: AGE 1.6.0 crashes its backend (PostgreSQL 15) on the
// validity test written with $parameters, or with them bound any later than the top.
WITH $valid_at AS valid_at, $known_at AS known_at
MATCH (x) WHERE x.k = $entity
OPTIONAL MATCH (x)-[:SUBJECT_OF]->(s1:Statement)
WITH valid_at, known_at, x, collect({s: s1.k, subj: x.k}) AS as_subject
OPTIONAL MATCH (subj2)-[:SUBJECT_OF]->(s2:Statement)-[:ABOUT]->(x)
WITH valid_at, known_at, as_subject, collect({s: s2.k, subj: subj2.k}) AS as_object
UNWIND as_subject + as_object AS pair
WITH valid_at, known_at, pair WHERE pair.s IS NOT NULL
MATCH (s:Statement) WHERE s.k = pair.s AND s.ends_fact IS NULL AND s.recorded_at <= known_at
MATCH (subj) WHERE subj.k = pair.subj
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, valid_at, known_at,
     CASE WHEN s.superseded_at IS NOT NULL AND s.superseded_at <= known_at THEN s.valid_until
          WHEN s.valid_until_inferred = true THEN null
          ELSE s.valid_until END AS until,
     CASE WHEN s.superseded_at IS NOT NULL AND s.superseded_at <= known_at THEN s.superseded_at ELSE null END AS superseded
WHERE (coalesce(s.valid_from, s.valid_start) IS NULL OR coalesce(s.valid_from, s.valid_start) <= valid_at)
  AND (until IS NULL OR valid_at < until)
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH subj, s, o, until, superseded, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, until AS valid_until, s.recorded_at AS recorded_at, superseded AS superseded_at, s.recurrence AS recurrence, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at
ORDER BY s.predicate, s.valid_from, s.recorded_at, s.k
