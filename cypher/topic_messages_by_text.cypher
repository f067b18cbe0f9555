// The messages that say any of these keyphrases, in every namespace (reads every keyphrase: give a namespace and use topic_messages to go by key).
// params: texts (a list of keyphrase texts: words case-folded, one space between them)
// columns: namespace, conversation, message, speaker, at, message_text, keyphrase, mention, char_start, char_end, byte_start, byte_end, score, extractor
MATCH (p:Keyphrase) WHERE p.text IN $texts
MATCH (p)-[e:APPEARS_IN]->(m:Message)
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, m.speaker AS speaker, m.at AS at, m.text AS message_text, p.text AS keyphrase, e.mention AS mention, e.char_start AS char_start, e.char_end AS char_end, e.byte_start AS byte_start, e.byte_end AS byte_end, e.score AS score, e.extractor AS extractor
