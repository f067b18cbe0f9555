// The statements read from one message, with the exact span of each.
// params: conversation (a conversation id), ordinal (the message's position, from 0), namespace (its namespace)
// keys: message = message(namespace, conversation, ordinal)
// columns: subject, predicate, value, object, quote, char_start, char_end, tier
// The message is found by its key (made from the three parameters), through the key index.
MATCH (m:Message) WHERE m.k = $message
MATCH (m)<-[e:EVIDENCED_BY]-(s:Statement)<-[:SUBJECT_OF]-(subj)
OPTIONAL MATCH (s)-[:ABOUT]->(o)
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, e.quote AS quote, e.char_start AS char_start, e.char_end AS char_end, e.tier AS tier
ORDER BY e.char_start, s.predicate
