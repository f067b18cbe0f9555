// Every vertex's label and properties: the vertex half of the graph's logical content (agefacts digest).
// params: none
// columns: label, properties
MATCH (n) RETURN label(n) AS label, properties(n) AS properties
