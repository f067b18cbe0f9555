// An entity's current relations to other entities (statements whose object is an entity), with their quotes.
// params: entity (an entity key)
// columns: subject, predicate, object, object_type, object_key, quote
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)-[:ABOUT]->(o)
WHERE subj.k = $entity AND s.superseded_at IS NULL AND s.ends_fact IS NULL
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WITH subj, s, o, min([e.at, e.k]) AS first
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WHERE e.k = first[1]
RETURN coalesce(subj.name, subj.role) AS subject, s.predicate AS predicate, coalesce(o.name, o.k) AS object, label(o) AS object_type, o.k AS object_key, e.quote AS quote
ORDER BY s.predicate, coalesce(o.name, o.k)
