-- What the search counts of the messages it searches, for a placement to add up over its servers (sql/003_search.sql).
-- params: namespace (a namespace, or null for all), question, wording (as search_messages takes it, or null)
-- columns: scope
SELECT agefacts.search_scope(%(graph)s, %(namespace)s::text, %(question)s::text, %(wording)s::text[]) AS scope
