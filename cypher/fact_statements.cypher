// The statements that facts about one entity are read from, as known at a time: those it is the subject or the object of.
// params: entity (an entity key), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, stated_until, recurrence, ends_fact, corrects, single_valued, recorded_at, said_at, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at, evidence_key, said
// agefacts.timeline reads these rows (facts, ask, show, Memory and MCP all do): the statements
// said by known_at, each with its evidence said by then (its earliest, cited; the time of each;
// how many). stated_until is the end a statement gave itself, not
// one write-time supersession inferred.
// Where the entity is the object of a single-valued predicate (Oslo, of lives_in), the subject's
// other values of it can end its facts: agefacts reads them with group_statements, for those
// groups only. Two parts, UNION ALL: the entity as subject, then as object, each walking typed
// edges from the entity's key (index scans), so the cost does not grow with the graph (a
// statement both parts find is read once). Most of a call's time is planning this text (on
// PostgreSQL 17 at 100k statements, 3.5 of 4.8 ms with the group walk in the second part, which
// cost every entity that planning): so the groups are a query of their own, run when needed.
// (Collecting both sides' statement keys and matching them again by key let a server's planner,
// given statistics, hash-join a scan of the whole Statement label.) The time parameter is bound to a variable
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
WITH subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, collect(e.at) AS said_at, collect([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS said, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, s.valid_until AS stated_until, s.recurrence AS recurrence, coalesce(s.ends_fact, false) AS ends_fact, coalesce(s.corrects, false) AS corrects, coalesce(s.single_valued, false) AS single_valued, s.recorded_at AS recorded_at, said_at, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at, first[1] AS evidence_key, said
UNION ALL
MATCH (x) WHERE x.k = $entity
MATCH (s:Statement)-[:ABOUT]->(x)
WITH s, x AS o, $known_at AS known_at
WHERE s.recorded_at <= known_at
MATCH (subj)-[:SUBJECT_OF]->(s)
WITH subj, s, o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, collect(e.at) AS said_at, collect([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS said, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, s.valid_until AS stated_until, s.recurrence AS recurrence, coalesce(s.ends_fact, false) AS ends_fact, coalesce(s.corrects, false) AS corrects, coalesce(s.single_valued, false) AS single_valued, s.recorded_at AS recorded_at, said_at, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at, first[1] AS evidence_key, said
