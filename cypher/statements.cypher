// Every statement of one namespace (or of all, when namespace is null) as known at a time: what agefacts.timeline reads to list current facts (the demo's table).
// params: namespace (a namespace, or null for all), known_at (an instant, UTC with Z)
// columns: subject, predicate, value, object, valid_from, stated_until, recurrence, ends_fact, corrects, single_valued, recorded_at, said_at, quote, conversation, message, char_start, char_end, evidence, namespace, statement, subject_type, subject_key, object_type, object_key, quoted_at, evidence_key, said
// It reads the whole Statement label (or a namespace's share of it): for one entity, read
// fact_statements instead.
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)
WITH subj, s, $known_at AS known_at, $namespace AS ns
WHERE s.recorded_at <= known_at AND (ns IS NULL OR s.namespace = ns)
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o, known_at
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.at <= known_at
WITH subj, s, o, min([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS first, collect(e.at) AS said_at, collect([e.at, e.k, e.quote, m.conversation, m.ordinal, e.char_start, e.char_end]) AS said, count(e) AS evidence
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, s.valid_from AS valid_from, CASE WHEN s.valid_until_inferred = true THEN null ELSE s.valid_until END AS stated_until, s.recurrence AS recurrence, coalesce(s.ends_fact, false) AS ends_fact, coalesce(s.corrects, false) AS corrects, coalesce(s.single_valued, false) AS single_valued, s.recorded_at AS recorded_at, said_at, first[2] AS quote, first[3] AS conversation, first[4] AS message, first[5] AS char_start, first[6] AS char_end, evidence, s.namespace AS namespace, s.k AS statement, label(subj) AS subject_type, subj.k AS subject_key, label(o) AS object_type, o.k AS object_key, first[0] AS quoted_at, first[1] AS evidence_key, said
