// Every vertex's label and properties: the vertex half of the graph's logical content (agefacts digest).
// params: namespace (a namespace, or null for all)
// columns: label, properties
MATCH (n) WHERE $namespace IS NULL OR n.namespace = $namespace RETURN label(n) AS label, properties(n) AS properties
