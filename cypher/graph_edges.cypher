// Every edge's label, its ends' keys and its properties: the edge half of the graph's logical content (agefacts digest).
// params: namespace (a namespace, or null for all: an edge joins two vertices of one namespace)
// columns: label, start_key, end_key, properties
MATCH (a)-[e]->(b) WHERE $namespace IS NULL OR a.namespace = $namespace RETURN label(e) AS label, a.k AS start_key, b.k AS end_key, properties(e) AS properties
