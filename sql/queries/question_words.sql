-- Why a question found nothing: its words that were searched, those that are a speaker's name, and how many messages there are (sql/003_search.sql).
-- params: namespace (a namespace, or null for all), question
-- columns: searched, names, messages
SELECT * FROM agefacts.question_words(%(graph)s, %(namespace)s::text, %(question)s::text)
