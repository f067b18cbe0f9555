-- The question queue: follow-ups still open (or all, with include_resolved), most urgent first.
-- params: namespace (a namespace, or null for all), include_resolved (true to list answered ones too; null or false for the open ones)
-- columns: namespace, conversation, gap, priority, question, reason, asked_at, resolved_at
SELECT namespace, conversation, gap, priority, question, reason, asked_at, resolved_at
FROM agefacts.questions
WHERE graph = %(graph)s
  AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
  AND (resolved_at IS NULL OR coalesce(%(include_resolved)s::boolean, false))
ORDER BY CASE priority WHEN 'immediate' THEN 0 ELSE 1 END, asked_at, namespace, conversation, gap
