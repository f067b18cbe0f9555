// The messages that say any of these keyphrases (by key: the key index finds each one), and where.
// params: keys (a list of keyphrase keys)
// columns: namespace, conversation, message, speaker, at, message_text, keyphrase, mention, char_start, char_end, byte_start, byte_end, score, extractor
UNWIND $keys AS key
MATCH (p:Keyphrase) WHERE p.k = key
MATCH (p)-[e:APPEARS_IN]->(m:Message)
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, m.speaker AS speaker, m.at AS at, m.text AS message_text, p.text AS keyphrase, e.mention AS mention, e.char_start AS char_start, e.char_end AS char_end, e.byte_start AS byte_start, e.byte_end AS byte_end, e.score AS score, e.extractor AS extractor
