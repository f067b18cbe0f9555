// Entities whose key, name or one of whose mentions is the text (case-insensitive); 'user' names the namespace's owner.
// params: text (what to look for), namespace (a namespace, or null for all)
MATCH (n)
WHERE n.type IS NOT NULL AND ($namespace IS NULL OR n.namespace = $namespace)
  AND (n.k = $text OR toLower(n.name) = toLower($text) OR (n.role = 'user' AND toLower($text) = 'user')
       OR size([m IN coalesce(n.mentions, []) WHERE toLower(m) = toLower($text)]) > 0)
RETURN n.k AS key, n.namespace AS namespace, n.type AS type, coalesce(n.name, n.role) AS name, n.mentions AS mentions, n.resolution AS resolution
ORDER BY namespace, type, key
