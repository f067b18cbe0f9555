// Entities whose key, name or one of whose mentions is the text (case-insensitive, typographic quotes and apostrophes folded); 'user' names the namespace's owner.
// params: text (what to look for), namespace (a namespace, or null for all)
// columns: key, namespace, type, name, mentions, resolution
// runs: once per entity label (agefacts reads the entity types' labels only, not statements or messages)
// The folding is agefacts.typography.cypher_fold_quotes (a test holds this file to it): "Alessandro’s" finds "Alessandro's".
MATCH (n)
WHERE n.type IS NOT NULL AND ($namespace IS NULL OR n.namespace = $namespace)
WITH n, [coalesce(n.name, '')] + coalesce(n.mentions, []) AS names
WITH n, [x IN names | replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(toLower(x), '«', '"'), '»', '"'), '‘', '\''), '’', '\''), '‚', '\''), '‛', '\''), '“', '"'), '”', '"'), '„', '"'), '‟', '"'), '′', '\''), '″', '"')] AS forms
WHERE n.k = $text OR (n.role = 'user' AND toLower($text) = 'user') OR replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(toLower($text), '«', '"'), '»', '"'), '‘', '\''), '’', '\''), '‚', '\''), '‛', '\''), '“', '"'), '”', '"'), '„', '"'), '‟', '"'), '′', '\''), '″', '"') IN forms
RETURN n.k AS key, n.namespace AS namespace, n.type AS type, coalesce(n.name, n.role) AS name, n.mentions AS mentions, n.resolution AS resolution
ORDER BY n.namespace, n.type, n.k
