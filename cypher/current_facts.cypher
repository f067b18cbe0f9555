// Some current facts of every namespace with the words they were read from (the demo's table): the first 12 by namespace, subject, predicate and object.
// params: none
// columns: namespace, subject, predicate, object, quote
MATCH (x)-[:SUBJECT_OF]->(s:Statement)-[e:EVIDENCED_BY]->(m:Message)
WHERE s.superseded_at IS NULL AND s.ends_fact IS NULL
OPTIONAL MATCH (s)-[:ABOUT]->(o)
RETURN s.namespace AS namespace, coalesce(x.name, x.role, x.k) AS subject, s.predicate AS predicate, coalesce(o.name, o.k, s.value) AS object, e.quote AS quote
// Ordered by expressions, not RETURN aliases: AGE before 1.7.0 cannot resolve an alias there.
ORDER BY s.namespace, coalesce(x.name, x.role, x.k), s.predicate, coalesce(o.name, o.k, s.value)
LIMIT 12
