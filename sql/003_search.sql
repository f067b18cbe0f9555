-- Message search: PostgreSQL's own full-text search, ranked by BM25.
--
-- Measured before choosing (docs/recall.md): the embedded engine offers no BM25 index (its
-- extensions are AGE and PL/pgSQL), and a server would need one installed, while full-text
-- search is in every PostgreSQL. So both engines use the same thing: a GIN index on each
-- message's words (the 'english' configuration: stop words dropped, inflections folded, so
-- "painting" finds "paint"), and BM25 computed here from the words of the messages that match,
-- which weighs a word by its rarity among the messages searched and a match by the message's
-- length. The index is an expression on the Message label's own properties, so it can never
-- disagree with the graph: a load, a replacement or a forget keeps it as it keeps the table.

-- A message's words (weighted 'D'), its speaker's name (weighted 'A': the weights tell what
-- was said from who said it), and one word for its namespace ('ns' and the namespace's
-- md5): the GIN index then finds a question's words in one namespace by
-- one index search, where a separate namespace index would have every message of the
-- namespace read and its words made again (measured: 13 ms against 3 ms at 370 messages).
-- Any text can say that word too, so the search also checks each message's namespace: the
-- word only narrows what the index returns, it never decides.
CREATE OR REPLACE FUNCTION agefacts.message_words(properties ag_catalog.agtype)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT setweight(to_tsvector('english'::regconfig, coalesce(ag_catalog.agtype_object_field_text(properties, 'name'), '')), 'A')
        || to_tsvector('english'::regconfig, coalesce(ag_catalog.agtype_object_field_text(properties, 'text'), ''))
        || array_to_tsvector(ARRAY['ns' || md5(coalesce(ag_catalog.agtype_object_field_text(properties, 'namespace'), ''))])
$fn$;

CREATE OR REPLACE FUNCTION agefacts.message_namespace(properties ag_catalog.agtype)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ag_catalog.agtype_object_field_text(properties, 'namespace')
$fn$;

-- A message's place in its conversation: with the namespace, what the Message_place index
-- holds, so the turns around a message found are found by their place.
CREATE OR REPLACE FUNCTION agefacts.message_conversation(properties ag_catalog.agtype)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ag_catalog.agtype_object_field_text(properties, 'conversation')
$fn$;

CREATE OR REPLACE FUNCTION agefacts.message_ordinal(properties ag_catalog.agtype)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ag_catalog.agtype_object_field_text(properties, 'ordinal')::bigint
$fn$;

-- When a message was sent, as text ('2023-05-08T13:56:00Z' sorts in time order): with the
-- namespace, what the Message_at index holds, so the messages of a time are a range of it.
CREATE OR REPLACE FUNCTION agefacts.message_at(properties ag_catalog.agtype)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ag_catalog.agtype_object_field_text(properties, 'at')
$fn$;

-- The Message label's search indexes, made with its key index (agefacts.index_label): the
-- words; the namespace with each message's place, conversation and ordinal (a search is in
-- one namespace, BM25 counts that namespace's messages, and a message found is searched with
-- the turns around it, found by their place: by their keys, hashes made for each, they were a
-- third of a search at 29,410 messages); and the namespace with the time sent (the messages
-- of a time a question names).
-- A role that may not create them leaves them to the owner: search is then slower, never
-- different.
-- The words index keeps a short pending list (the rows written and not yet merged into it,
-- 64 kB at most where PostgreSQL's default is 4 MB): every search reads all of that list, and
-- the embedded engine has no autovacuum to merge it. A load of 5,882 messages left 231 pages
-- there, and a search took 47 ms at the median instead of 20 (docs/recall.md); loading took the
-- same time either way, where merging each row at once (fastupdate off) cost a fifth more.
CREATE OR REPLACE FUNCTION agefacts.index_messages(graph_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    BEGIN
        IF NOT agefacts.relation_exists(graph_name, 'Message_words') THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I USING gin (agefacts.message_words(properties)) '
                           'WITH (gin_pending_list_limit = 64)', 'Message_words', graph_name, 'Message');
        ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = graph_name AND c.relname = 'Message_words'
                            AND 'gin_pending_list_limit=64' = ANY (c.reloptions)) THEN
            -- (a graph made before: only its owner may change the index, and what is pending
            -- stays until the next write merges it)
            BEGIN
                EXECUTE format('ALTER INDEX %I.%I SET (gin_pending_list_limit = 64)', graph_name, 'Message_words');
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;
            END;
        END IF;
        IF NOT agefacts.relation_exists(graph_name, 'Message_place') THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (agefacts.message_namespace(properties), '
                           'agefacts.message_conversation(properties), agefacts.message_ordinal(properties))',
                           'Message_place', graph_name, 'Message');
        END IF;
        -- The namespace alone, as graphs made before indexed it, is the head of both others.
        EXECUTE format('DROP INDEX IF EXISTS %I.%I', graph_name, 'Message_namespace');
        IF NOT agefacts.relation_exists(graph_name, 'Message_at') THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (agefacts.message_namespace(properties), '
                           'agefacts.message_at(properties))', 'Message_at', graph_name, 'Message');
        END IF;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
END
$fn$;

-- The Conversation label's namespace, for the counts of a namespace's messages that its
-- conversations carry (agefacts.speaker_counts).
CREATE OR REPLACE FUNCTION agefacts.index_conversations(graph_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT agefacts.relation_exists(graph_name, 'Conversation_namespace') THEN
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (agefacts.message_namespace(properties))',
                       'Conversation_namespace', graph_name, 'Conversation');
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    NULL;
END
$fn$;

-- Words that ask rather than name, as the 'english' configuration folds them: they find
-- nothing but the asking ("what did she say", "tell me about").
CREATE OR REPLACE FUNCTION agefacts.asking_words()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT ARRAY['say', 'said', 'tell', 'told', 'talk', 'mention', 'rememb', 'recal']
$fn$;

-- The forms of an irregular verb, which the 'english' stemmer leaves apart ("met" is not
-- "meet", "bought" not "buy"): a question's word finds the verb's other forms too, read as
-- the index folds each. Forms that are stop words ("was", "had", "did") are left out, as are
-- verbs with a form that is mostly another word ("left", "saw", "rose", "spring", "a bit").
-- The groups are folded here, once, and the function made with their stems written in: folding
-- them on each call cost 2 ms of every search.
DO $do$
DECLARE
    stems text;
BEGIN
    SELECT string_agg(quote_literal(tsvector_to_array(to_tsvector('english'::regconfig, g))::text), ', ')
    INTO stems
    FROM unnest(ARRAY[
              'arise arose arisen', 'awake awoke awoken', 'beat beaten',
              'become became', 'begin began begun', 'bend bent', 'bind bound',
              'bleed bled', 'blow blew blown', 'break broke broken', 'breed bred', 'bring brought',
              'build built', 'burn burnt', 'buy bought', 'catch caught', 'choose chose chosen',
              'cling clung', 'come came', 'creep crept', 'deal dealt', 'dig dug',
              'draw drew drawn', 'dream dreamt', 'drink drank drunk', 'drive drove driven',
              'eat ate eaten', 'fall fell fallen', 'feed fed', 'feel felt', 'fight fought', 'find found',
              'flee fled', 'fly flew flown', 'forbid forbade forbidden', 'forget forgot forgotten',
              'forgive forgave forgiven', 'freeze froze frozen', 'get got gotten', 'give gave given',
              'go went gone', 'grow grew grown', 'hang hung', 'hear heard', 'hide hid hidden',
              'hold held', 'keep kept', 'kneel knelt', 'know knew known', 'lead led',
              'lean leant', 'leap leapt', 'learn learnt', 'lend lent', 'lose lost', 'make made',
              'mean meant', 'meet met', 'pay paid', 'ride rode ridden', 'ring rang rung',
              'run ran', 'seek sought', 'sell sold', 'send sent', 'sew sewn',
              'shake shook shaken', 'shine shone', 'shoot shot', 'show shown', 'shrink shrank shrunk',
              'sing sang sung', 'sink sank sunk', 'sit sat', 'sleep slept', 'slide slid',
              'speak spoke spoken', 'speed sped', 'spend spent', 'spin spun',
              'stand stood', 'steal stole stolen', 'stick stuck', 'sting stung', 'stink stank stunk',
              'strike struck', 'swear swore sworn', 'sweep swept', 'swim swam swum', 'swing swung',
              'take took taken', 'teach taught', 'tear tore torn', 'think thought', 'throw threw thrown',
              'understand understood', 'wake woke woken', 'wear wore worn', 'weave wove woven',
              'weep wept', 'win won', 'write wrote written',
              'child children', 'person people', 'man men', 'woman women', 'mouse mice', 'foot feet',
              'tooth teeth', 'goose geese']) AS g;
    EXECUTE format($make$
        CREATE OR REPLACE FUNCTION agefacts.word_forms(lexemes text[])
        RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
            SELECT coalesce(array_agg(DISTINCT f ORDER BY f), '{}')
            FROM (SELECT unnest(lexemes) AS f
                  UNION
                  SELECT unnest(g.forms::text[]) FROM unnest(ARRAY[%s]::text[]) AS g(forms)
                  WHERE g.forms::text[] && lexemes) x
        $fn$
    $make$, stems);
END
$do$;

-- The words of the predicates a question names ("married" names spouse_of: "husband",
-- "wife", "spouse"), as the index folds them, less the question's own (``asked``) and those
-- that ask rather than name. The ontology gives them (agefacts.retrieve.wording); a search
-- weighs each below a word of the question's own, and a placement counts them as it counts those.
CREATE OR REPLACE FUNCTION agefacts.wording_words(wording text[], asked text[])
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(array_agg(DISTINCT a.lexeme ORDER BY a.lexeme), '{}')
    FROM unnest(to_tsvector('english'::regconfig, coalesce(array_to_string(wording, ' '), ''))) a
    WHERE a.lexeme <> ALL (asked) AND a.lexeme <> ALL (agefacts.asking_words())
$fn$;

-- A text as an agtype string, to compare with a property: a key (as the key indexes hold it:
-- inlined, so the index serves), or a time.
CREATE OR REPLACE FUNCTION agefacts.agtype_text(t text)
RETURNS ag_catalog.agtype LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT (to_jsonb(t)::text)::ag_catalog.agtype
$fn$;

-- A message vertex's columns as the message queries return them.
CREATE OR REPLACE FUNCTION agefacts.message_fields(p ag_catalog.agtype)
RETURNS TABLE (namespace text, conversation text, message bigint, speaker text, name text, at text, text text)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT agefacts.message_namespace(p),
           agefacts.message_conversation(p),
           agefacts.message_ordinal(p),
           ag_catalog.agtype_object_field_text(p, 'speaker'),
           ag_catalog.agtype_object_field_text(p, 'name'),
           agefacts.message_at(p),
           ag_catalog.agtype_object_field_text(p, 'text')
$fn$;

-- The search reached the turns around a message by their keys, made here as agefacts makes
-- them; it reaches them by their place now (Message_place).
DROP FUNCTION IF EXISTS agefacts.message_key(text, text, bigint);

-- Who says how many of a namespace's messages (of every namespace when ns is null): the
-- names of its speakers that say a word of ``asked`` (at least those; every name when it is
-- null), each with its count of turns, and the rest of its messages as one row under no name
-- (null). Summed from each conversation's counts, which its vertex carries (`messages`;
-- `speakers`, the names, and `turns`, each name's count), by the Conversation namespace
-- index: counting the messages themselves read every message of the namespace, 24 ms of each
-- search at 29,410 messages in 1,360 conversations. The lists of names are read once each (a
-- namespace has few), and the counts only of conversations where a name asked for speaks.
-- Where a conversation of the namespace was written before it carried them, or the namespace
-- has messages and no conversation (written by hand), the messages are counted as before (a
-- load with --force writes the counts).
DROP FUNCTION IF EXISTS agefacts.speaker_counts(text, text);
CREATE OR REPLACE FUNCTION agefacts.speaker_counts(graph_name text, ns text, asked text[] DEFAULT NULL)
RETURNS TABLE (name text, n double precision) LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    uncounted boolean := true;
    total double precision;
    lists text[];
    wanted text[];
    names text[] := '{}';
    counts double precision[] := '{}';
BEGIN
    IF NOT agefacts.relation_exists(graph_name, 'Message') THEN
        RETURN;
    END IF;
    BEGIN
        IF agefacts.relation_exists(graph_name, 'Conversation') THEN
            EXECUTE format($q$
                SELECT count(*) = 0 OR bool_or(l.uncounted), sum(l.n),
                       coalesce(array_agg(l.speakers) FILTER (WHERE l.speakers IS NOT NULL), '{}')
                FROM (SELECT ag_catalog.agtype_object_field_text(c.properties, 'speakers') AS speakers,
                             bool_or(ag_catalog.agtype_object_field_text(c.properties, 'messages') IS NULL) AS uncounted,
                             sum(ag_catalog.agtype_object_field_text(c.properties, 'messages')::double precision) AS n
                      FROM %1$I.%2$I c
                      WHERE $1::text IS NULL OR agefacts.message_namespace(c.properties) = $1::text
                      GROUP BY 1) l
            $q$, graph_name, 'Conversation') INTO uncounted, total, lists USING ns;
        END IF;
        IF NOT uncounted THEN
            SELECT coalesce(array_agg(DISTINCT s.name), '{}') INTO wanted
            FROM unnest(lists) l CROSS JOIN LATERAL json_array_elements_text(l::json) s(name)
            WHERE asked IS NULL
               OR EXISTS (SELECT 1 FROM unnest(to_tsvector('english'::regconfig, s.name)) t WHERE t.lexeme = ANY (asked));
            IF cardinality(wanted) > 0 THEN
                EXECUTE format($q$
                    SELECT coalesce(array_agg(x.name ORDER BY x.name), '{}'), coalesce(array_agg(x.n ORDER BY x.name), '{}')
                    FROM (SELECT s.name, sum(t.n::double precision) AS n
                          FROM (SELECT ag_catalog.agtype_object_field_text(c.properties, 'speakers') AS speakers,
                                       ag_catalog.agtype_object_field_text(c.properties, 'turns') AS turns
                                FROM %1$I.%2$I c
                                WHERE $1::text IS NULL OR agefacts.message_namespace(c.properties) = $1::text) c
                          CROSS JOIN LATERAL json_array_elements_text(c.speakers::json) WITH ORDINALITY s(name, i)
                          CROSS JOIN LATERAL json_array_elements_text(c.turns::json) WITH ORDINALITY t(n, i)
                          WHERE c.speakers = ANY ($2) AND s.i = t.i AND s.name = ANY ($3)
                          GROUP BY s.name) x
                $q$, graph_name, 'Conversation') INTO names, counts
                USING ns, ARRAY(SELECT l FROM unnest(lists) l
                                WHERE EXISTS (SELECT 1 FROM json_array_elements_text(l::json) s WHERE s = ANY (wanted))), wanted;
            END IF;
        END IF;
    EXCEPTION WHEN data_exception THEN
        -- counts a person wrote in another shape (not lists, not numbers): the messages are
        -- counted instead
        uncounted := true;
    END;
    IF uncounted THEN
        RETURN QUERY EXECUTE format($q$
            SELECT ag_catalog.agtype_object_field_text(m.properties, 'name'), count(*)::double precision
            FROM %1$I.%2$I m
            WHERE $1::text IS NULL OR agefacts.message_namespace(m.properties) = $1::text
            GROUP BY 1
        $q$, graph_name, 'Message') USING ns;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT u.name, u.n FROM unnest(names, counts) AS u(name, n)
        UNION ALL
        SELECT NULL, total - coalesce((SELECT sum(x) FROM unnest(counts) x), 0)
        WHERE total > coalesce((SELECT sum(x) FROM unnest(counts) x), 0);
END
$fn$;

-- The k messages that best match a question's words, best first, with each one's BM25 score,
-- the question's words it says, and those said in the turns it replies to. Rarity is counted
-- among the messages of the namespace searched (of every namespace when it is null); ``b`` is
-- BM25's length weight (0.5, and k1 1.2: measured on LoCoMo's first five conversations,
-- docs/recall.md). A word that is a speaker's name (a turn's ``name``) counts for that
-- person's own turns, ``speaker_weight`` times a word as rare, and not where the name is
-- merely said ("Thanks, Gina!" is not about Gina); it ranks a message up, never in, unless the
-- question asks by names alone. A message is also searched with what it replies to: the turn
-- before it, and the turn before that when its own speaker said it, each word there counted
-- ``context_weight`` times a word of its own ("I bought it in Paris." after "Where did you get
-- that painting?"); and with the turn that answers it, alike ("I went yesterday." before "The
-- support group sounds amazing, Caroline!"). Those turns are read when the search runs, never
-- stored with the message, so a replacement or a forget leaves nothing to mend. Each message
-- returned lists its keyphrases whose texts are among ``topics`` (the runs of the question's
-- words), from its own edges, and says whether it is evidence of a statement. The words of
-- the predicates the question names (``wording``: "married" names spouse_of, whose words are
-- "husband", "wife", "spouse") are searched too, each counted ``wording_weight`` times a word
-- of the question's own (0.3: measured on LoCoMo, docs/recall.md), and listed in ``words``
-- where a message says them. A question with no searchable word returns no row.
-- Made anew each time this file runs: its columns have changed, and it took no context_weight
-- before (left beside the new one, a call with four arguments would match both).
DROP FUNCTION IF EXISTS agefacts.search_messages(text, text, text, integer, double precision, double precision);
DROP FUNCTION IF EXISTS agefacts.search_messages(text, text, text, integer, double precision, double precision,
                                                 double precision);
DROP FUNCTION IF EXISTS agefacts.search_messages(text, text, text, integer, double precision, double precision,
                                                 double precision, integer);
DROP FUNCTION IF EXISTS agefacts.search_messages(text, text, text, integer, double precision, double precision,
                                                 double precision, integer, jsonb);
DROP FUNCTION IF EXISTS agefacts.search_messages(text, text, text, integer, double precision, double precision,
                                                 double precision, integer, jsonb, text[]);
CREATE OR REPLACE FUNCTION agefacts.search_messages(graph_name text, ns text, question text, k integer,
                                                    speaker_weight double precision DEFAULT 3.0,
                                                    b double precision DEFAULT 0.5,
                                                    context_weight double precision DEFAULT 0.3,
                                                    scored integer DEFAULT 200,
                                                    scope jsonb DEFAULT NULL,
                                                    topics text[] DEFAULT NULL,
                                                    wording text[] DEFAULT NULL,
                                                    wording_weight double precision DEFAULT 0.3)
RETURNS TABLE (namespace text, conversation text, message bigint, speaker text, name text, at text,
               message_text text, score double precision, words text[], around text[], keyphrases jsonb,
               evidence boolean)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    asked text[];
    extra text[];
    speakers text[];
    spoke double precision[];
    total double precision;
    named text[];
    named_df double precision[];
    sought text[];
    query tsquery;
    wordq tsquery;
    many integer;
    sought_df double precision[];
    chosen ag_catalog.graphid[];
    saying ag_catalog.graphid[];
    found_where text := 'agefacts.message_words(m.properties) @@ $1';
    -- what each message returned says of itself, where the graph has the labels to say it (one
    -- whose messages were written by hand may have no keyphrases, no statements)
    said_keyphrases text := '''[]''::jsonb';
    is_evidence text := 'NULL::boolean';
BEGIN
    -- The question's words as the index folds them, less those that ask rather than name
    -- ("what did she say about the flood": only "flood" is looked for).
    SELECT agefacts.word_forms(coalesce(array_agg(DISTINCT a.lexeme), '{}')) INTO asked
    FROM unnest(to_tsvector('english'::regconfig, question)) a
    WHERE a.lexeme <> ALL (agefacts.asking_words());
    IF cardinality(asked) = 0 OR NOT agefacts.relation_exists(graph_name, 'Message') THEN
        RETURN;
    END IF;
    extra := agefacts.wording_words(wording, asked);
    -- How many messages there are, and who says how many: a name is known as a name before
    -- the search, so a speaker's other turns are never read for it.
    SELECT coalesce(array_agg(s.name), '{}'), coalesce(array_agg(s.n), '{}'), coalesce(sum(s.n), 0)
    INTO speakers, spoke, total
    FROM agefacts.speaker_counts(graph_name, ns, asked) s;
    SELECT coalesce(array_agg(l.lexeme ORDER BY l.lexeme), '{}'), coalesce(array_agg(l.df ORDER BY l.lexeme), '{}')
    INTO named, named_df
    FROM (SELECT t.lexeme, sum(sp.n) AS df
          FROM unnest(speakers, spoke) AS sp(name, n), unnest(to_tsvector('english'::regconfig, coalesce(sp.name, ''))) t
          WHERE t.lexeme = ANY (asked) GROUP BY t.lexeme) l;
    IF scope IS NOT NULL THEN
        -- Counted over every server of a placement (agefacts.search_scope, added up): a word is a
        -- name, and as rare, as it is among all their messages.
        total := (scope->>'total')::double precision;
        SELECT coalesce(array_agg(n.key ORDER BY n.key), '{}'),
               coalesce(array_agg(n.value::double precision ORDER BY n.key), '{}')
        INTO named, named_df
        FROM jsonb_each_text(scope->'named') n WHERE n.key = ANY (asked);
    END IF;
    sought := ARRAY(SELECT w FROM unnest(asked || extra) w WHERE w <> ALL (named) ORDER BY w);
    -- Each word quoted as tsquery quotes (a quote doubled), the words or-ed.
    query := (SELECT string_agg('''' || replace(w, '''', '''''') || '''', ' | ')
              FROM unnest(CASE WHEN cardinality(sought) > 0 THEN sought ELSE named END) w)::tsquery;
    IF ns IS NOT NULL THEN
        query := query && ('ns' || md5(ns))::tsquery;
    END IF;
    -- Scoring a message makes its words again (the index stores no counts): where the
    -- question's words are said in more than ``scored`` messages (a large namespace, a common
    -- word), only that many are scored, those that say the rarest of them (each word's
    -- messages by the index, nothing made again), and each word's rarity is counted from all
    -- of its messages, as if all were scored. At 29,410 messages in a namespace scoring 400
    -- halved the search's time, and 200 took a third off what was left; LoCoMo's recall did
    -- not change with either (with 100 its R@10 fell 0.001). Asked for more than that, at
    -- least as many as asked for are scored.
    scored := greatest(scored, k);
    -- The words index answers for the namespace too (its word is in the query): a message's
    -- namespace is read again only to check, after it (OFFSET 0 keeps the planner from
    -- reading the namespace's messages by its btree and making every one's words again, 16
    -- ms at 590 messages where the words index takes 1). Those found are what is scored,
    -- unless there are too many.
    EXECUTE format('SELECT coalesce(array_agg(x.id), ''{}'') FROM (SELECT m.id FROM (SELECT m.id, m.properties FROM %I.%I m '
                   'WHERE agefacts.message_words(m.properties) @@ $1 OFFSET 0) m '
                   'WHERE $3::text IS NULL OR agefacts.message_namespace(m.properties) = $3::text LIMIT $2) x',
                   graph_name, 'Message') INTO chosen USING query, scored + 1, ns;
    many := cardinality(chosen);
    IF many <= scored THEN
        found_where := 'm.id = ANY ($10)';
    ELSIF cardinality(sought) > 0 THEN
        wordq := CASE WHEN ns IS NULL THEN NULL ELSE ('ns' || md5(ns))::tsquery END;
        EXECUTE format($q$
            WITH per AS (
                SELECT w.w, ARRAY(SELECT m.id
                                  FROM (SELECT m.id, m.properties FROM %1$I.%2$I m
                                        WHERE agefacts.message_words(m.properties)
                                              @@ (CASE WHEN $2::tsquery IS NULL THEN w.q ELSE w.q && $2::tsquery END)
                                        OFFSET 0) m
                                  WHERE $5::text IS NULL OR agefacts.message_namespace(m.properties) = $5::text) AS ids
                FROM (SELECT x AS w, ('''' || replace(x, '''', '''''') || '''')::tsquery AS q
                      FROM unnest($1::text[]) x) w
            ),
            rated AS MATERIALIZED (
                SELECT u.id, sum(CASE WHEN p.w = ANY ($6) THEN $7 ELSE 1 END
                                 * ln(1 + ($3 - cardinality(p.ids) + 0.5) / (cardinality(p.ids) + 0.5))) AS score
                FROM per p CROSS JOIN LATERAL unnest(p.ids) u(id)
                GROUP BY u.id
            ),
            -- Messages alike in the words they say are chosen by their keys, which their content
            -- makes, so the same messages written in another order (other ids) are scored alike.
            -- Only a message as good as the last one chosen can be chosen: the others' keys are
            -- never read (reading every found message's key was a third of this statement at
            -- 29,410 messages).
            best AS (
                SELECT r.id FROM rated r JOIN %1$I.%2$I m ON m.id = r.id
                WHERE r.score >= (SELECT min(t.score) FROM (SELECT r2.score FROM rated r2
                                                              ORDER BY r2.score DESC LIMIT $4) t)
                ORDER BY r.score DESC,
                         (ag_catalog.agtype_object_field_text(m.properties, 'k') || ' ' || r.id::text) COLLATE "C"
                LIMIT $4
            )
            SELECT (SELECT array_agg(b.id) FROM best b),
                   (SELECT array_agg(cardinality(p.ids)::double precision ORDER BY p.w) FROM per p),
                   (SELECT array_agg(r.id) FROM rated r)
        $q$, graph_name, 'Message') INTO chosen, sought_df, saying USING sought, wordq, total, scored, ns, extra,
                                                                         wording_weight;
        found_where := 'm.id = ANY ($10)';
    END IF;
    IF scope IS NOT NULL THEN
        sought_df := ARRAY(SELECT coalesce((scope->'df'->>w)::double precision, 0) FROM unnest(sought) w ORDER BY w);
    END IF;
    IF cardinality(topics) > 0 AND agefacts.relation_exists(graph_name, 'Keyphrase')
       AND agefacts.relation_exists(graph_name, 'APPEARS_IN') THEN
        -- the keyphrases of a message returned that the question says (``topics``: their
        -- texts), from the message's own edges, so never more than k messages' are read
        said_keyphrases := format($k$
            (SELECT coalesce(jsonb_agg(jsonb_build_object(
                        'text', ag_catalog.agtype_object_field_text(kp.properties, 'text'),
                        'mention', ag_catalog.agtype_object_field_text(e.properties, 'mention'),
                        'char_start', ag_catalog.agtype_object_field_text(e.properties, 'char_start')::bigint,
                        'char_end', ag_catalog.agtype_object_field_text(e.properties, 'char_end')::bigint,
                        'byte_start', ag_catalog.agtype_object_field_text(e.properties, 'byte_start')::bigint,
                        'byte_end', ag_catalog.agtype_object_field_text(e.properties, 'byte_end')::bigint,
                        'score', ag_catalog.agtype_object_field_text(e.properties, 'score')::double precision,
                        'extractor', ag_catalog.agtype_object_field_text(e.properties, 'extractor'))
                      ORDER BY ag_catalog.agtype_object_field_text(e.properties, 'char_start')::bigint,
                               ag_catalog.agtype_object_field_text(kp.properties, 'text')), '[]'::jsonb)
             FROM %1$I."APPEARS_IN" e JOIN %1$I."Keyphrase" kp ON kp.id = e.start_id
             WHERE e.end_id = b.id AND ag_catalog.agtype_object_field_text(kp.properties, 'text') = ANY ($14::text[]))
        $k$, graph_name);
    END IF;
    IF agefacts.relation_exists(graph_name, 'EVIDENCED_BY') THEN
        -- whether a message returned is evidence of a statement: what was taken back of those
        -- that are not need not be asked
        is_evidence := format('EXISTS (SELECT 1 FROM %I."EVIDENCED_BY" ev WHERE ev.end_id = b.id)', graph_name);
    ELSE
        is_evidence := 'false';
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH found AS MATERIALIZED (
            -- Words are made once per message found (GIN stores no counts), never for the rest.
            SELECT m.id, m.properties AS p, agefacts.message_words(m.properties) AS words
            FROM %1$I.%2$I m
            WHERE %3$s AND ($12::text IS NULL OR agefacts.message_namespace(m.properties) = $12::text)
        ),
        place AS MATERIALIZED (
            SELECT f.id, f.p, mf.namespace AS ns, mf.conversation AS conv, mf.message AS ord, mf.speaker, mf.name,
                   length(ts_filter(f.words, '{a,d}'))::double precision AS dl
            FROM found f CROSS JOIN LATERAL agefacts.message_fields(f.p) mf
        ),
        named AS (SELECT n.lexeme, n.df FROM unnest($3::text[], $4::double precision[]) AS n(lexeme, df)),
        hits AS MATERIALIZED (
            -- A speaker's name counts once for each of their turns; any other word by how often it is said.
            SELECT f.id, u.lexeme, nm.df AS name_df, nm.lexeme IS NOT NULL AS is_name,
                   CASE WHEN nm.lexeme IS NOT NULL THEN ('A' = ANY (u.weights))::int::double precision
                        ELSE cardinality(array_positions(u.weights, 'D'))::double precision END AS tf
            FROM found f CROSS JOIN LATERAL unnest(f.words) u LEFT JOIN named nm ON nm.lexeme = u.lexeme
            WHERE u.lexeme = ANY ($2::text[] || $3::text[])
        ),
        every AS (SELECT s.w, s.df FROM unnest($2::text[], $11::double precision[]) AS s(w, df)),
        rarity AS (
            SELECT r.lexeme, ln(1 + ($5 - r.df + 0.5) / (r.df + 0.5)) AS idf
            FROM (SELECT h.lexeme, coalesce(max(h.name_df), max(e.df), count(*)) AS df
                  FROM hits h LEFT JOIN every e ON e.w = h.lexeme
                  WHERE h.tf > 0 GROUP BY h.lexeme) r
        ),
        mean AS (SELECT greatest(avg(p.dl), 1)::double precision AS avgdl FROM place p),
        -- The turns a found message's words are context of (the one before, the next two), when
        -- not found themselves.
        near AS MATERIALIZED (
            SELECT DISTINCT p.ns, p.conv, p.ord + d.d AS ord
            FROM place p CROSS JOIN (VALUES (-1), (1), (2)) AS d(d)
            WHERE EXISTS (SELECT 1 FROM hits h WHERE h.id = p.id AND NOT h.is_name AND h.tf > 0)
              AND NOT EXISTS (SELECT 1 FROM place o WHERE o.ns = p.ns AND o.conv = p.conv AND o.ord = p.ord + d.d)
        ),
        more AS MATERIALIZED (
            -- (its own words too, made only for one that says a word of the question: where only
            -- some messages are scored, one left out may; where all are, none of these does)
            SELECT v.id, v.properties AS p, n.ns, n.conv, n.ord,
                   ag_catalog.agtype_object_field_text(v.properties, 'speaker') AS speaker,
                   ag_catalog.agtype_object_field_text(v.properties, 'name') AS name,
                   CASE WHEN v.id IN (SELECT unnest($13::ag_catalog.graphid[]))
                        THEN agefacts.message_words(v.properties) END AS words
            FROM near n CROSS JOIN LATERAL (
                SELECT v.id, v.properties FROM %1$I.%2$I v
                WHERE agefacts.message_namespace(v.properties) = n.ns
                  AND agefacts.message_conversation(v.properties) = n.conv
                  AND agefacts.message_ordinal(v.properties) = n.ord
                OFFSET 0) v
        ),
        cand AS (
            SELECT p.id, p.ns, p.conv, p.ord, p.speaker, p.name, p.dl FROM place p
            UNION ALL
            -- a turn reached as context weighs as long as the mean, unless it says a word itself
            SELECT m.id, m.ns, m.conv, m.ord, m.speaker, m.name,
                   coalesce(length(ts_filter(m.words, '{a,d}'))::double precision, mean.avgdl)
            FROM more m, mean
        ),
        said AS (
            SELECT h.id, h.lexeme, h.is_name, h.tf, false AS around FROM hits h
            UNION ALL
            SELECT m.id, u.lexeme, false, cardinality(array_positions(u.weights, 'D'))::double precision, false
            FROM more m CROSS JOIN LATERAL unnest(m.words) u
            WHERE u.lexeme = ANY ($2::text[])
            UNION ALL
            -- a turn reached only as context still counts its speaker's name
            SELECT m.id, t.lexeme, true, 1, false
            FROM more m CROSS JOIN LATERAL unnest(to_tsvector('english'::regconfig, coalesce(m.name, ''))) t
            JOIN named nm ON nm.lexeme = t.lexeme
            UNION ALL
            SELECT c.id, h.lexeme, false, $9 * h.tf, true
            FROM cand c
            JOIN place p ON p.ns = c.ns AND p.conv = c.conv
                        AND (p.ord = c.ord - 1
                             OR (p.ord = c.ord - 2 AND p.speaker IS NOT DISTINCT FROM c.speaker
                                 AND p.name IS NOT DISTINCT FROM c.name))
            JOIN hits h ON h.id = p.id AND NOT h.is_name AND h.tf > 0
            UNION ALL
            -- and the turn that answers it
            SELECT c.id, h.lexeme, false, $9 * h.tf, true
            FROM cand c
            JOIN place p ON p.ns = c.ns AND p.conv = c.conv AND p.ord = c.ord + 1
            JOIN hits h ON h.id = p.id AND NOT h.is_name AND h.tf > 0
        ),
        per AS (
            -- a word counts where the message says it; where only the turns before it do, it is "around"
            SELECT s.id, s.lexeme, bool_or(s.is_name) AS is_name, sum(s.tf) AS tf,
                   NOT bool_or(NOT s.around AND s.tf > 0) AS around
            FROM said s GROUP BY s.id, s.lexeme
        ),
        scored AS (
            SELECT w.id,
                   sum(CASE WHEN w.is_name THEN $6 WHEN w.lexeme = ANY ($15::text[]) THEN $16 ELSE 1 END
                       * r.idf * w.tf * 2.2 / (w.tf + 1.2 * (1 - $7 + $7 * c.dl / mean.avgdl))) AS score,
                   coalesce(array_agg(w.lexeme ORDER BY w.lexeme) FILTER (WHERE NOT w.around), '{}') AS words,
                   coalesce(array_agg(w.lexeme ORDER BY w.lexeme) FILTER (WHERE w.around), '{}') AS around
            FROM per w JOIN rarity r USING (lexeme) JOIN cand c ON c.id = w.id, mean
            WHERE w.tf > 0
            GROUP BY w.id
            HAVING bool_or(NOT w.is_name) OR cardinality($2::text[]) = 0
        )
        SELECT b.namespace, b.conversation, b.message, b.speaker, b.name, b.at, b.text, b.score, b.words,
               b.around,
               %4$s,
               %5$s
        FROM (SELECT f.id, mf.*, s.score, s.words, s.around
              FROM scored s
              JOIN (SELECT p.id, p.p FROM place p UNION ALL SELECT m.id, m.p FROM more m) f USING (id)
              CROSS JOIN LATERAL agefacts.message_fields(f.p) mf
              ORDER BY s.score DESC, 2, 3, 4
              LIMIT $8) b
        ORDER BY b.score DESC, 1, 2, 3
    $q$, graph_name, 'Message', found_where, said_keyphrases, is_evidence)
    USING query, sought, named, named_df, total, speaker_weight, b, k, context_weight, chosen, sought_df, ns, saying,
          topics, extra, wording_weight;
END
$fn$;

-- What a search's ranking counts of the messages it searches (sql above): how many there are,
-- how many turns each speaker's name has (by the name's words the question says), and how many
-- messages say each of the question's words. A placement adds these up over its servers and
-- hands the sums to each server's search (``scope``), so that each ranks its messages as one
-- server holding every message would, and their matches merge by score.
-- (it took no wording before: left beside the new one, a call with three arguments would match both)
DROP FUNCTION IF EXISTS agefacts.search_scope(text, text, text);
CREATE OR REPLACE FUNCTION agefacts.search_scope(graph_name text, ns text, question text, wording text[] DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    asked text[];
    total double precision;
    named jsonb;
    df jsonb;
BEGIN
    SELECT agefacts.word_forms(coalesce(array_agg(DISTINCT a.lexeme), '{}')) INTO asked
    FROM unnest(to_tsvector('english'::regconfig, question)) a
    WHERE a.lexeme <> ALL (agefacts.asking_words());
    IF cardinality(asked) = 0 OR NOT agefacts.relation_exists(graph_name, 'Message') THEN
        RETURN jsonb_build_object('total', 0, 'named', '{}'::jsonb, 'df', '{}'::jsonb);
    END IF;
    WITH s AS (SELECT * FROM agefacts.speaker_counts(graph_name, ns, asked))
    SELECT (SELECT coalesce(sum(s.n), 0) FROM s),
           (SELECT coalesce(jsonb_object_agg(l.lexeme, l.df), '{}'::jsonb)
            FROM (SELECT t.lexeme, sum(s.n) AS df
                  FROM s, unnest(to_tsvector('english'::regconfig, coalesce(s.name, ''))) t
                  WHERE t.lexeme = ANY (asked) GROUP BY t.lexeme) l)
    INTO total, named;
    -- Each word's messages by the index (with the namespace's word, as the search narrows).
    EXECUTE format($q$
        SELECT coalesce(jsonb_object_agg(w.w, (SELECT count(*) FROM %1$I.%2$I m
                                               WHERE agefacts.message_words(m.properties) @@ w.q
                                                 AND ($2::text IS NULL OR agefacts.message_namespace(m.properties) = $2::text))),
                        '{}'::jsonb)
        FROM (SELECT x AS w,
                     CASE WHEN $2::text IS NULL THEN ('''' || replace(x, '''', '''''') || '''')::tsquery
                          ELSE ('''' || replace(x, '''', '''''') || '''')::tsquery && ('ns' || md5($2::text))::tsquery END AS q
              FROM unnest($1::text[]) x) w
    $q$, graph_name, 'Message') INTO df USING asked || agefacts.wording_words(wording, asked), ns;
    RETURN jsonb_build_object('total', total, 'named', named, 'df', df);
END
$fn$;

-- The messages of a namespace sent inside the times a question names ([start, end) instants:
-- agefacts.retrieve.named_times), k at most: those of a person the question names first (a
-- word of the question in the turn's name: "What did Nate do on 25 May, 2022?"), then in the
-- order they were sent. A question of names and a date finds that day's messages this way,
-- where its words alone may find none.
CREATE OR REPLACE FUNCTION agefacts.time_messages(graph_name text, ns text, question text, starts text[],
                                                  ends text[], k integer)
RETURNS TABLE (namespace text, conversation text, message bigint, speaker text, name text, at text,
               message_text text, by_name boolean)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    asked text[];
BEGIN
    IF NOT agefacts.relation_exists(graph_name, 'Message') THEN
        RETURN;
    END IF;
    -- Names are compared word for word, lower-cased: no name is folded as a word is.
    asked := regexp_split_to_array(lower(question), '[^[:alnum:]]+');
    RETURN QUERY EXECUTE format($q$
        SELECT d.* FROM (
            SELECT DISTINCT ON (mf.conversation, mf.message)
                   mf.namespace, mf.conversation, mf.message, mf.speaker, mf.name, mf.at, mf.text,
                   coalesce(regexp_split_to_array(lower(mf.name), '[^[:alnum:]]+') && $4, false) AS by_name
            FROM unnest($2, $3) AS t(a, b)
            CROSS JOIN LATERAL (
                SELECT m.properties AS p FROM %1$I.%2$I m
                WHERE agefacts.message_namespace(m.properties) = $1
                  AND agefacts.message_at(m.properties) >= t.a AND agefacts.message_at(m.properties) < t.b
                OFFSET 0) m
            CROSS JOIN LATERAL agefacts.message_fields(m.p) mf
            ORDER BY mf.conversation, mf.message) d
        ORDER BY d.by_name DESC, d.at, d.conversation, d.message
        LIMIT $5
    $q$, graph_name, 'Message') USING ns, starts, ends, asked, k;
END
$fn$;

-- Why a question found nothing, for the answer to say: its words that were searched (as the
-- person wrote them), those that are a speaker's name, and how many messages the namespace
-- (every namespace, when null) holds. Run only when nothing was found.
CREATE OR REPLACE FUNCTION agefacts.question_words(graph_name text, ns text, question text)
RETURNS TABLE (searched text[], names text[], messages bigint)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    total bigint := 0;
    speakers text[] := '{}';
BEGIN
    IF agefacts.relation_exists(graph_name, 'Message') THEN
        EXECUTE format($q$
            SELECT count(*), coalesce(array_agg(DISTINCT x.name) FILTER (WHERE x.name IS NOT NULL), '{}')
            FROM (SELECT ag_catalog.agtype_object_field_text(m.properties, 'name') AS name FROM %1$I.%2$I m
                  WHERE $1::text IS NULL OR agefacts.message_namespace(m.properties) = $1::text) x
        $q$, graph_name, 'Message') INTO total, speakers USING ns;
        speakers := tsvector_to_array(to_tsvector('english'::regconfig, array_to_string(speakers, ' ')));
    END IF;
    RETURN QUERY
    SELECT coalesce(array_agg(w.word ORDER BY w.n) FILTER (WHERE NOT w.is_name), '{}'),
           coalesce(array_agg(w.word ORDER BY w.n) FILTER (WHERE w.is_name), '{}'),
           total
    FROM (SELECT DISTINCT ON (l.lexeme) t.word, t.n, l.lexeme = ANY (speakers) AS is_name
          FROM regexp_split_to_table(question, '[^[:alnum:]'']+') WITH ORDINALITY AS t(word, n)
          CROSS JOIN LATERAL unnest(to_tsvector('english'::regconfig, t.word)) l
          WHERE l.lexeme <> ALL (agefacts.asking_words())
          ORDER BY l.lexeme, t.n) w;
END
$fn$;

-- Messages by key, each found through the key index (the named query ``messages``). Cypher's
-- UNWIND of a list parameter followed by a match on the key is planned as a hash join over
-- every message (47 ms at 20,000 messages, against 0.3 ms by the index).
CREATE OR REPLACE FUNCTION agefacts.messages_by_key(graph_name text, keys text[])
RETURNS TABLE (namespace text, conversation text, message bigint, speaker text, name text, at text, text text)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY EXECUTE format($q$
        SELECT mf.*
        FROM unnest($1) WITH ORDINALITY AS u(k, i)
        CROSS JOIN LATERAL (
            SELECT v.properties AS p FROM %I.%I v
            WHERE ag_catalog.agtype_access_operator(v.properties, '"k"'::ag_catalog.agtype) = agefacts.agtype_text(u.k)
            OFFSET 0) m
        CROSS JOIN LATERAL agefacts.message_fields(m.p) mf
        ORDER BY u.i
    $q$, graph_name, 'Message') USING keys;
END
$fn$;

-- The messages that say any of these keyphrases (the named query ``topic_messages``), and
-- where: each keyphrase by its key, then its APPEARS_IN edges and their messages, by index
-- (Cypher's match on a list of keys read every keyphrase: 12 of a 35 ms ask on LoCoMo).
CREATE OR REPLACE FUNCTION agefacts.topic_messages(graph_name text, keys text[])
RETURNS TABLE (namespace text, conversation text, message bigint, speaker text, at text, message_text text,
               keyphrase text, mention text, char_start bigint, char_end bigint, byte_start bigint,
               byte_end bigint, score double precision, extractor text)
LANGUAGE plpgsql STABLE
SET join_collapse_limit = 1 SET from_collapse_limit = 1
AS $fn$
BEGIN
    RETURN QUERY EXECUTE format($q$
        SELECT mf.namespace, mf.conversation, mf.message, mf.speaker, mf.at, mf.text,
               ag_catalog.agtype_object_field_text(p.properties, 'text'),
               ag_catalog.agtype_object_field_text(e.properties, 'mention'),
               ag_catalog.agtype_object_field_text(e.properties, 'char_start')::bigint,
               ag_catalog.agtype_object_field_text(e.properties, 'char_end')::bigint,
               ag_catalog.agtype_object_field_text(e.properties, 'byte_start')::bigint,
               ag_catalog.agtype_object_field_text(e.properties, 'byte_end')::bigint,
               ag_catalog.agtype_object_field_text(e.properties, 'score')::double precision,
               ag_catalog.agtype_object_field_text(e.properties, 'extractor')
        FROM unnest($1) AS u(k)
        CROSS JOIN LATERAL (
            SELECT v.id, v.properties FROM %1$I."Keyphrase" v
            WHERE ag_catalog.agtype_access_operator(v.properties, '"k"'::ag_catalog.agtype) = agefacts.agtype_text(u.k)
            OFFSET 0) p
        JOIN %1$I."APPEARS_IN" e ON e.start_id = p.id
        JOIN %1$I."Message" m ON m.id = e.end_id
        CROSS JOIN LATERAL agefacts.message_fields(m.properties) mf
    $q$, graph_name) USING keys;
END
$fn$;

-- What was taken back of what messages said (the named query ``message_withdrawals``): for
-- each message, each statement it is evidence of that a later correction withdrew, or a later
-- negation ended, as known at a time; each (message, statement, kind) once, with the earliest
-- such saying. It was Cypher, whose match on a list of keys reads every message and every
-- statement (25 ms of a 37 ms ask at 100,000 statements); here each step is an index's.
-- Comparisons are agtype's, as Cypher's are (0 and 0.0 are one value; times sort as text).
CREATE OR REPLACE FUNCTION agefacts.message_withdrawals(graph_name text, keys text[], known_at text)
RETURNS TABLE (namespace text, conversation text, message bigint, predicate text, subject text, what jsonb,
               corrected boolean, at text, by_conversation text, by_message bigint, by_quote text)
LANGUAGE plpgsql STABLE
-- The joins are planned in the order written (each step an index's, from the keys): searching
-- every order took 12 ms of planning for 6 ms of work.
SET join_collapse_limit = 1 SET from_collapse_limit = 1
AS $fn$
DECLARE
    evidence ag_catalog.graphid[];
BEGIN
    -- The messages by key, those that are evidence of something: most messages found for a
    -- question are evidence of nothing, and then the query below (most of whose time is its
    -- planning) is not run.
    EXECUTE format($q$
        SELECT coalesce(array_agg(m.id ORDER BY m.id), '{}')
        FROM unnest($1) AS u(k)
        CROSS JOIN LATERAL (
            SELECT v.id FROM %1$I."Message" v
            WHERE ag_catalog.agtype_access_operator(v.properties, '"k"'::ag_catalog.agtype) = agefacts.agtype_text(u.k)
            OFFSET 0) m
        WHERE EXISTS (SELECT 1 FROM %1$I."EVIDENCED_BY" e WHERE e.end_id = m.id)
    $q$, graph_name) INTO evidence USING keys;
    IF cardinality(evidence) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH said AS MATERIALIZED (
            -- each statement a message is evidence of (a negation withdraws nothing here), with
            -- its subject, its object and when that message said it
            SELECT m.id AS mid, m.properties AS mp, e.properties AS ep, s.id AS sid, s.properties AS sp,
                   so.start_id AS subj, (SELECT a.end_id FROM %1$I."ABOUT" a WHERE a.start_id = s.id LIMIT 1) AS obj
            FROM unnest($1) AS u(id)
            JOIN %1$I."Message" m ON m.id = u.id
            JOIN %1$I."EVIDENCED_BY" e ON e.end_id = m.id
            JOIN %1$I."Statement" s ON s.id = e.start_id
            JOIN %1$I."SUBJECT_OF" so ON so.end_id = s.id
            WHERE ag_catalog.agtype_access_operator(s.properties, '"ends_fact"'::ag_catalog.agtype) IS NULL
        ), ending AS MATERIALIZED (
            -- the negations and corrections of those subjects, each with every saying by known_at
            SELECT so.start_id AS subj, c.properties AS cp,
                   (SELECT a.end_id FROM %1$I."ABOUT" a WHERE a.start_id = c.id LIMIT 1) AS obj,
                   ce.properties AS cep, cm.properties AS cmp
            FROM (SELECT DISTINCT d.subj FROM said d) d
            JOIN %1$I."SUBJECT_OF" so ON so.start_id = d.subj
            JOIN %1$I."Statement" c ON c.id = so.end_id
            JOIN %1$I."EVIDENCED_BY" ce ON ce.start_id = c.id
            JOIN %1$I."Message" cm ON cm.id = ce.end_id
            WHERE ag_catalog.agtype_access_operator(c.properties, '"ends_fact"'::ag_catalog.agtype) = 'true'::ag_catalog.agtype
              AND ag_catalog.agtype_access_operator(ce.properties, '"at"'::ag_catalog.agtype)
                  <= agefacts.agtype_text($2)
        ), later AS (
            SELECT DISTINCT ON (d.mid, d.sid, 3)
                   d.mid, d.mp, coalesce(ag_catalog.agtype_access_operator(n.cp, '"corrects"'::ag_catalog.agtype)
                                         = 'true'::ag_catalog.agtype, false) AS corrected, d.sp,
                   d.subj, d.obj, n.cep, n.cmp
            FROM said d
            JOIN ending n ON n.subj = d.subj
            WHERE ag_catalog.agtype_access_operator(n.cp, '"predicate"'::ag_catalog.agtype)
                  = ag_catalog.agtype_access_operator(d.sp, '"predicate"'::ag_catalog.agtype)
              AND ag_catalog.agtype_access_operator(n.cep, '"at"'::ag_catalog.agtype)
                  > ag_catalog.agtype_access_operator(d.ep, '"at"'::ag_catalog.agtype)
              AND ((d.obj IS NULL AND n.obj IS NULL
                    AND ag_catalog.agtype_access_operator(n.cp, '"value"'::ag_catalog.agtype)
                        = ag_catalog.agtype_access_operator(d.sp, '"value"'::ag_catalog.agtype))
                   OR (d.obj IS NOT NULL AND n.obj IS NOT NULL
                       AND ag_catalog.agtype_access_operator(
                               (SELECT o.properties FROM %1$I._ag_label_vertex o WHERE o.id = d.obj), '"k"'::ag_catalog.agtype)
                           = ag_catalog.agtype_access_operator(
                               (SELECT o.properties FROM %1$I._ag_label_vertex o WHERE o.id = n.obj), '"k"'::ag_catalog.agtype)))
            ORDER BY d.mid, d.sid, 3,
                     ag_catalog.agtype_access_operator(n.cep, '"at"'::ag_catalog.agtype),
                     ag_catalog.agtype_access_operator(n.cmp, '"conversation"'::ag_catalog.agtype),
                     ag_catalog.agtype_access_operator(n.cmp, '"ordinal"'::ag_catalog.agtype),
                     ag_catalog.agtype_access_operator(n.cep, '"quote"'::ag_catalog.agtype)
        )
        SELECT mf.namespace, mf.conversation, mf.message,
               ag_catalog.agtype_object_field_text(l.sp, 'predicate'),
               coalesce(ag_catalog.agtype_object_field_text(sv.properties, 'name'),
                        ag_catalog.agtype_object_field_text(sv.properties, 'role'),
                        ag_catalog.agtype_object_field_text(sv.properties, 'k')),
               ag_catalog.agtype_out(coalesce(
                   ag_catalog.agtype_access_operator(ov.properties, '"name"'::ag_catalog.agtype),
                   ag_catalog.agtype_access_operator(ov.properties, '"k"'::ag_catalog.agtype),
                   ag_catalog.agtype_access_operator(l.sp, '"value"'::ag_catalog.agtype)))::text::jsonb,
               l.corrected,
               ag_catalog.agtype_object_field_text(l.cep, 'at'),
               ag_catalog.agtype_object_field_text(l.cmp, 'conversation'),
               ag_catalog.agtype_object_field_text(l.cmp, 'ordinal')::bigint,
               ag_catalog.agtype_object_field_text(l.cep, 'quote')
        FROM later l
        CROSS JOIN LATERAL agefacts.message_fields(l.mp) mf
        JOIN %1$I._ag_label_vertex sv ON sv.id = l.subj
        LEFT JOIN %1$I._ag_label_vertex ov ON ov.id = l.obj
    $q$, graph_name) USING evidence, known_at;
END
$fn$;

-- Graphs written before search existed get its indexes once, when this file first runs
-- (a new label gets them from agefacts.index_label).
DO $do$
DECLARE
    g text;
BEGIN
    FOR g IN SELECT gr.name FROM ag_catalog.ag_graph gr JOIN ag_catalog.ag_label l ON l.graph = gr.graphid
             WHERE l.name = 'Message' AND l.kind = 'v' ORDER BY 1 LOOP
        PERFORM agefacts.index_messages(g);
    END LOOP;
    FOR g IN SELECT gr.name FROM ag_catalog.ag_graph gr JOIN ag_catalog.ag_label l ON l.graph = gr.graphid
             WHERE l.name = 'Conversation' AND l.kind = 'v' ORDER BY 1 LOOP
        PERFORM agefacts.index_conversations(g);
    END LOOP;
END
$do$;
