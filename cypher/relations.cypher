// An entity's current relations to other entities (statements whose object is an entity), with their quotes.
// params: entity (an entity key)
MATCH (subj)-[:SUBJECT_OF]->(s:Statement)-[:ABOUT]->(o)
WHERE subj.k = $entity AND s.superseded_at IS NULL AND s.ends_fact IS NULL
MATCH (s)-[e:EVIDENCED_BY]->(:Message)
WITH subj, s, o, e ORDER BY e.at, e.k
WITH subj, s, o, collect(e.quote) AS quotes
RETURN coalesce(subj.name, subj.role) AS subject, s.predicate AS predicate, coalesce(o.name, o.k) AS object, label(o) AS object_type, o.k AS object_key, quotes[0] AS quote
ORDER BY predicate, object
