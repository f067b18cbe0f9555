// Every statement of one entity's values for one predicate, as said: started, ended, negated and corrected ones, each with its own times and its earliest words.
// params: entity (an entity key), predicate (a predicate name)
// order: history (the order of agefacts.derive.HISTORY_ORDER, appended here)
// columns: subject, predicate, value, object, kind, valid_from, valid_until, recorded_at, quote, conversation, statement, namespace
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)
WHERE subj.k = $entity AND s.predicate = $predicate
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH subj, s, o
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WITH subj, s, o, min([e.at, e.k]) AS first
MATCH (s)-[e:EVIDENCED_BY]->(m:Message)
WHERE e.k = first[1]
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, CASE WHEN s.corrects = true THEN 'corrects' WHEN s.ends_fact = true THEN 'ends' ELSE 'states' END AS kind, s.valid_from AS valid_from, s.valid_until AS valid_until, s.recorded_at AS recorded_at, e.quote AS quote, m.conversation AS conversation, s.k AS statement, s.namespace AS namespace
