// Every entity of a namespace: who and what its memory knows (the owner's name is its role, 'user').
// params: namespace (a namespace)
// columns: key, type, name, role, mentions
// runs: once per entity label (agefacts reads the entity types' labels only, not statements or messages)
MATCH (n)
WHERE n.type IS NOT NULL AND n.namespace = $namespace
RETURN n.k AS key, n.type AS type, n.name AS name, n.role AS role, n.mentions AS mentions
ORDER BY n.k
