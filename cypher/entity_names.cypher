// Every entity with what it can be called (name, mentions, its role to the owner), for linking a question's words to entities.
// params: namespace (a namespace, or null for all)
// columns: key, namespace, name, mentions, attrs, role
// runs: once per entity label (agefacts reads the entity types' labels only, not statements or messages)
MATCH (n) WHERE n.type IS NOT NULL AND ($namespace IS NULL OR n.namespace = $namespace)
RETURN n.k AS key, n.namespace AS namespace, n.name AS name, n.mentions AS mentions, n.attrs AS attrs, n.role AS role
