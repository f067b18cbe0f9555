// The statements that facts about one entity are read from, as known at a time: the entity's own, and for each single-valued predicate it is the object of, every value its subject was given (which can end it).
// params: entity (an entity key), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, stated_until, recurrence, ends_fact, corrects, single_valued, recorded_at, said_at, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at, evidence_key
// agefacts.timeline reads these rows (facts, ask, show, Memory and MCP all do): the statements
// said by known_at, each with its evidence said by then (its earliest, cited; the time of each;
// how many). stated_until is the end a statement gave itself, not
// one write-time supersession inferred.
// Two parts, UNION ALL: the entity as subject; then as object, with, for a single-valued
// predicate, the subject's other values of it. Each walks typed edges from the entity's key
// (index scans), so the cost does not grow with the graph (a statement both parts find is
// read once). Most of a call's time on a server is planning this text (3.7 of 4.8 ms at 100k
// statements, PostgreSQL 17): a third part for the other values cost 1.5 ms more than walking
// the subject's statements in the second. (Collecting both sides' statement keys and matching
// them again by key let a server's planner, given statistics, hash-join a scan of the whole
// Statement label.) The time parameter is bound to a variable
// before it is compared (AGE 1.6.0 crashed its backend on the same WHERE with $known_at).
// The earliest evidence is the least [at, key, quote, ...] list: its at and unique key decide.
MATCH (x) WHERE x.k = $entity
MATCH (x)-[:SUBJECT_OF]->(s:Statement)
WITH x AS subj, s, $known_at AS known_at
WHERE s.recorded_at <= known_at
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, collect(e.at) AS said_at, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS stated_until, s.recurrence AS recurrence, coalesce(s.ends_fact, false) AS ends_fact, coalesce(s.corrects, false) AS corrects, coalesce(s.single_valued, false) AS single_valued, s.recorded_at AS recorded_at, said_at, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at, first[1] AS evidence_key
UNION ALL
MATCH (x) WHERE x.k = $entity
MATCH (s0:Statement)-[:ABOUT]->(x)
WITH s0, $known_at AS known_at
WHERE s0.recorded_at <= known_at
MATCH (subj)-[:SUBJECT_OF]->(s0)
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)
WHERE s.k = s0.k OR (s0.single_valued = true AND s.predicate = s0.predicate AND s.recorded_at <= known_at)
WITH DISTINCT subj, s, known_at
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, collect(e.at) AS said_at, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS stated_until, s.recurrence AS recurrence, coalesce(s.ends_fact, false) AS ends_fact, coalesce(s.corrects, false) AS corrects, coalesce(s.single_valued, false) AS single_valued, s.recorded_at AS recorded_at, said_at, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at, first[1] AS evidence_key
