// The key of every entity.
// params: none
// columns: key
// runs: once per entity label (agefacts reads the entity types' labels only, not statements or messages)
MATCH (n) WHERE n.type IS NOT NULL RETURN n.k AS key
