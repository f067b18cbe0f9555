-- What the search counts of the messages it searches, for a placement to add up over its servers (sql/003_search.sql).
-- params: namespace (a namespace, or null for all), question
-- columns: scope
SELECT agefacts.search_scope(%(graph)s, %(namespace)s::text, %(question)s::text) AS scope
