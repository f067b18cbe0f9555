-- Rejected claims counted by reason, from the ingest log (rejections are kept as data, not in the graph).
-- params: namespace (a namespace, or null for all)
-- columns: reason, claims, conversations
SELECT r.key AS reason, sum(r.value::int) AS claims, count(*) AS conversations
FROM agefacts.ingest_log l, jsonb_each_text(coalesce(l.counts -> 'rejected_reasons', '{}'::jsonb)) AS r
WHERE l.graph = %(graph)s AND (%(namespace)s::text IS NULL OR l.namespace = %(namespace)s::text)
GROUP BY r.key
ORDER BY claims DESC, reason
