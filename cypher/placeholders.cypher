// Entities still without a name (placeholders such as "my husband"), with how they were mentioned.
// params: namespace (a namespace, or null for all)
// columns: namespace, type, mentions, attrs, key
// runs: once per entity label (agefacts reads the entity types' labels only, not statements or messages)
MATCH (n)
WHERE n.type IS NOT NULL AND n.role IS NULL AND n.name IS NULL AND ($namespace IS NULL OR n.namespace = $namespace)
RETURN n.namespace AS namespace, n.type AS type, n.mentions AS mentions, n.attrs AS attrs, n.k AS key
ORDER BY n.namespace, n.k
