-- The messages that best match a question's words, best first (BM25 over PostgreSQL full-text search: sql/003_search.sql).
-- params: namespace (a namespace, or null for all), question, k (how many at most), scope (agefacts.search_scope's counts added up over a placement's servers, or null: this database's own), topics (keyphrase texts: each message returned lists those of its keyphrases, or null for none), wording (the words of the predicates the question names, each weighed below a word of its own: agefacts.retrieve.wording; or null)
-- columns: namespace, conversation, message, speaker, name, at, message_text, score, words, around, keyphrases, evidence
SELECT * FROM agefacts.search_messages(%(graph)s, %(namespace)s::text, %(question)s::text, %(k)s::int, scope => %(scope)s::jsonb,
                                       topics => %(topics)s::text[], wording => %(wording)s::text[])
