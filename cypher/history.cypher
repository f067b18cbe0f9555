// The succession of one entity's values for one predicate over time, superseded and ended facts included.
// params: entity (an entity key), predicate (a predicate name)
// order: supersession (the order of agefacts.derive.SUPERSESSION_ORDER, appended here)
// columns: subject, predicate, value, object, kind, valid_from, valid_until, until_inferred, recorded_at, superseded_at, quote, conversation, statement, namespace
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)
WHERE subj.k = $entity AND s.predicate = $predicate
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WITH subj, s, o, min([e.at, e.k]) AS first
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.k = first[1]
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, CASE WHEN s.corrects = true THEN 'corrects' WHEN s.ends_fact = true THEN 'ends' ELSE 'states' END AS kind, s.valid_from AS valid_from, s.valid_until AS valid_until, coalesce(s.valid_until_inferred, false) AS until_inferred, s.recorded_at AS recorded_at, s.superseded_at AS superseded_at, e.quote AS quote, m.conversation AS conversation, s.k AS statement, s.namespace AS namespace
