// The entity with this key (found through the key indexes rather than by reading every entity).
// params: text (an entity key), namespace (a namespace, or null for all)
// columns: key, namespace, type, name, mentions, resolution
MATCH (n) WHERE n.k = $text AND n.type IS NOT NULL AND ($namespace IS NULL OR n.namespace = $namespace)
RETURN n.k AS key, n.namespace AS namespace, n.type AS type, coalesce(n.name, n.role) AS name, n.mentions AS mentions, n.resolution AS resolution
