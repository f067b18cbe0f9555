-- Messages by key (the key index finds each one: sql/003_search.sql), in the order of the keys.
-- params: keys (a list of message keys)
-- columns: namespace, conversation, message, speaker, name, at, text
SELECT * FROM agefacts.messages_by_key(%(graph)s, %(keys)s::text[])
