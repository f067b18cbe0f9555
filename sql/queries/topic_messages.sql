-- The messages that say any of these keyphrases (by key: the key index finds each one: sql/003_search.sql), and where.
-- params: keys (a list of keyphrase keys)
-- columns: namespace, conversation, message, speaker, at, message_text, keyphrase, mention, char_start, char_end, byte_start, byte_end, score, extractor
SELECT * FROM agefacts.topic_messages(%(graph)s, %(keys)s::text[])
