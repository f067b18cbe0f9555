-- The messages of a namespace sent inside the times a question names, those of a person it names first, then in the order sent (sql/003_search.sql).
-- params: namespace, question, starts (instants, UTC with Z), ends (as many), k (how many at most)
-- columns: namespace, conversation, message, speaker, name, at, message_text, by_name
SELECT * FROM agefacts.time_messages(%(graph)s, %(namespace)s::text, %(question)s::text, %(starts)s::text[], %(ends)s::text[], %(k)s::int)
