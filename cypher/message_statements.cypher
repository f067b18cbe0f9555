// The statements read from one message, with the exact span of each.
// params: conversation (a conversation id), ordinal (the message's position, from 0), namespace (its namespace)
// columns: subject, predicate, value, object, quote, char_start, char_end, tier
MATCH (m:Message {conversation: $conversation, ordinal: $ordinal, namespace: $namespace})<-[e:EVIDENCED_BY]-(s:Statement)<-[:SUBJECT_OF]-(subj)
OPTIONAL MATCH (s)-[:ABOUT]->(o)
RETURN coalesce(subj.name, subj.role, subj.k) AS subject, s.predicate AS predicate, s.value AS value, coalesce(o.name, o.k) AS object, e.quote AS quote, e.char_start AS char_start, e.char_end AS char_end, e.tier AS tier
ORDER BY e.char_start, s.predicate
