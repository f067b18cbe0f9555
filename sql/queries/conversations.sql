-- The conversations loaded into this graph, with when and from where, and what they wrote.
-- params: namespace (a namespace, or null for all)
-- columns: namespace, conversation, loaded_at, source, statements, content_hash
SELECT namespace, conversation, loaded_at, source, (counts->>'statements')::int AS statements, content_hash
FROM agefacts.ingest_log
WHERE graph = %(graph)s
  AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
ORDER BY namespace, conversation
