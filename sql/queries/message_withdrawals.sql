-- What was taken back of what messages said: for each message, each statement it is evidence of that a later correction withdrew, or a later negation ended, as known at a time (sql/003_search.sql).
-- params: keys (a list of message keys), known_at (an instant, UTC with Z)
-- columns: namespace, conversation, message, predicate, subject, what, corrected, at, by_conversation, by_message, by_quote
SELECT * FROM agefacts.message_withdrawals(%(graph)s, %(keys)s::text[], %(known_at)s::text)
