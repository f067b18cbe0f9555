// Messages by key (the key index finds each one).
// params: keys (a list of message keys)
// columns: namespace, conversation, message, speaker, name, at, text
UNWIND $keys AS key
MATCH (m:Message) WHERE m.k = key
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, m.speaker AS speaker, m.name AS name, m.at AS at, m.text AS text
