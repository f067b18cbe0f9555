// The key of every entity.
// params: none
// columns: key
MATCH (n) WHERE n.type IS NOT NULL RETURN n.k AS key
