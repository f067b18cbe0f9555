// The history of several entities in one query: history for each key of a list, each row with the key it was read for (entity).
// params: entities (a list of entity keys), predicate (a predicate name)
// order: history (the order of agefacts.derive.HISTORY_ORDER, appended here)
// columns: subject, predicate, value, object, kind, valid_from, valid_until, recorded_at, quote, conversation, statement, namespace, entity
// One round trip and one plan for many entities (history over every namespace).
UNWIND $entities AS entity
MATCH (subj) WHERE subj.k = entity
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)
WHERE s.predicate = $predicate
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH entity, subj, s, o
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WITH entity, subj, s, o, min([e.at, e.k]) AS first
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.k = first[1]
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, CASE WHEN s.corrects = true THEN 'corrects' WHEN s.ends_fact = true THEN 'ends' ELSE 'states' END AS kind, s.valid_from AS valid_from, s.valid_until AS valid_until, s.recorded_at AS recorded_at, e.quote AS quote, m.conversation AS conversation, s.k AS statement, s.namespace AS namespace, entity
