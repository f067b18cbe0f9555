// What was taken back of what messages said: for each message, each statement it is evidence of that a later correction withdrew, or a later negation ended, as known at a time.
// params: keys (a list of message keys), known_at (an instant, UTC with Z)
// columns: namespace, conversation, message, predicate, subject, what, corrected, at, by_conversation, by_message, by_quote
// A correction ("not peanuts, it's sesame") or a negation ("I don't like jazz any more") of the
// same fact (subject, predicate, and object or value) said after the message, by known_at. Each
// (message, statement, kind) once, with the earliest such saying.
UNWIND $keys AS key
MATCH (m:Message) WHERE m.k = key
MATCH (m)<-[e:EVIDENCED_BY]-(s:Statement)<-[:SUBJECT_OF]-(subj)
WITH m, e, s, subj, $known_at AS known_at
WHERE s.ends_fact IS NULL
OPTIONAL MATCH (s)-[:ABOUT]->(o)
WITH m, e, s, subj, o, known_at
MATCH (subj)-[:SUBJECT_OF]->(c:Statement)-[ce:EVIDENCED_BY]->(cm:Message)
WHERE c.ends_fact = true AND c.predicate = s.predicate AND ce.at > e.at AND ce.at <= known_at
OPTIONAL MATCH (c)-[:ABOUT]->(co)
WITH m, s, subj, o, c, co, ce, cm
WHERE (o IS NULL AND co IS NULL AND c.value = s.value) OR (o IS NOT NULL AND co IS NOT NULL AND o.k = co.k)
WITH m, s, subj, o, coalesce(c.corrects, false) AS corrected, min([ce.at, cm.conversation, cm.ordinal, ce.quote]) AS first
RETURN m.namespace AS namespace, m.conversation AS conversation, m.ordinal AS message, s.predicate AS predicate, coalesce(subj.name, subj.role, subj.k) AS subject, coalesce(o.name, o.k, s.value) AS what, corrected, first[0] AS at, first[1] AS by_conversation, first[2] AS by_message, first[3] AS by_quote
