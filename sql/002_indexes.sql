-- Key lookups in Cypher should be written `MATCH (n:Label) WHERE n.k = $k`: AGE turns that into
-- the indexed expression below, while a pattern property `(n {k: $k})` becomes a containment
-- test that this index cannot serve.
--
-- Indexes agefacts keeps on every label it writes, created when a label is first used.
--
-- - every label: a UNIQUE btree on the key `k`. It makes key lookups (WHERE n.k = ...)
--   index scans, lets the bulk loader upsert with INSERT ... ON CONFLICT, and turns two loaders
--   racing to MERGE the same key into a unique violation that is retried, never a duplicate.
-- - the walk indexes: vertex labels on `id`, edge labels on `start_id` and on `end_id`, so
--   that walking from a vertex to its edges and on to the next vertex (statements by subject,
--   evidence by message, mentions by entity) is an index scan. AGE 1.7.0 makes these itself
--   (`<label>_pkey`, `<label>_start_id_idx`, `<label>_end_id_idx`) and they are then left
--   alone; AGE 1.6.0 makes none, and every walk scanned whole labels (facts at 20k
--   statements: 303 ms against 46 ms). Any index that leads with the column counts.
-- - Statement: a btree on the predicate, for statements of one predicate.
-- - Message: its words (GIN) and its namespace, for search (sql/003_search.sql).
-- - an entity type's label (kind 'n'): a btree on the namespace, so that finding an entity by
--   name reads one namespace's entities (at 100k statements: 4 ms against 22 ms reading every
--   entity, and 127 ms when every vertex label was read).
-- An index that exists is left alone before CREATE INDEX is reached: PostgreSQL checks that the
-- caller owns the table before it looks for the index, and a role that only loads owns none.
-- A walk or namespace index such a role cannot make is left to the owner (`agefacts setup`):
-- it makes queries faster, never different, and a load must not fail for it.
-- kind: 'v' one of agefacts' own vertex labels, 'n' an entity type's, 'e' an edge label.
CREATE OR REPLACE FUNCTION agefacts.walk_columns_unindexed(graph_name text, label_name text, kind text)
RETURNS text[] LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(array_agg(col ORDER BY col), '{}')
    FROM unnest(CASE WHEN kind = 'e' THEN ARRAY['start_id', 'end_id'] ELSE ARRAY['id'] END) AS col
    WHERE NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_index i
        JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE n.nspname = graph_name AND c.relname = label_name AND a.attname = col)
$fn$;

CREATE OR REPLACE FUNCTION agefacts.relation_exists(graph_name text, relation_name text)
RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = graph_name AND c.relname = relation_name)
$fn$;

CREATE OR REPLACE FUNCTION agefacts.index_label(graph_name text, label_name text, kind text)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    col text;
BEGIN
    IF NOT agefacts.relation_exists(graph_name, 'k_' || md5(label_name)) THEN
        EXECUTE format(
            'CREATE UNIQUE INDEX IF NOT EXISTS %I ON %I.%I (ag_catalog.agtype_access_operator(properties, %L::ag_catalog.agtype))',
            -- Named by a hash of the label: unique for every label by construction, and never the
            -- name of a label (those start with an upper-case letter) or of AGE's sequences.
            'k_' || md5(label_name), graph_name, label_name, '"k"');
    END IF;
    IF kind = 'v' AND label_name = 'Statement' AND NOT agefacts.relation_exists(graph_name, 'Statement_predicate') THEN
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON %I.%I (ag_catalog.agtype_access_operator(properties, %L::ag_catalog.agtype))',
            'Statement_predicate', graph_name, label_name, '"predicate"');
    END IF;
    -- Fact: a btree on the subject's key, for the fact versions of a subject's chains
    -- (those the bulk path recomputes; the subject itself may be gone).
    IF kind = 'v' AND label_name = 'Fact' AND NOT agefacts.relation_exists(graph_name, 'Fact_subject') THEN
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON %I.%I (ag_catalog.agtype_access_operator(properties, %L::ag_catalog.agtype))',
            'Fact_subject', graph_name, label_name, '"subject_key"');
    END IF;
    IF kind = 'v' AND label_name = 'Message' THEN
        PERFORM agefacts.index_messages(graph_name);  -- sql/003_search.sql
    END IF;
    IF kind = 'v' AND label_name = 'Conversation' THEN
        PERFORM agefacts.index_conversations(graph_name);  -- sql/003_search.sql
    END IF;
    IF kind = 'n' AND NOT agefacts.relation_exists(graph_name, 'n_' || md5(label_name)) THEN
        BEGIN
            EXECUTE format(
                'CREATE INDEX IF NOT EXISTS %I ON %I.%I (ag_catalog.agtype_access_operator(properties, %L::ag_catalog.agtype))',
                'n_' || md5(label_name), graph_name, label_name, '"namespace"');
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        END;
    END IF;
    -- A graph with tenants keeps every new label to them too (sql/004_tenants.sql).
    IF to_regclass('agefacts.tenants') IS NOT NULL
       AND EXISTS (SELECT 1 FROM agefacts.tenants t WHERE t.graph = graph_name) THEN
        PERFORM agefacts.protect_new_label(graph_name, label_name, CASE WHEN kind = 'e' THEN 'e' ELSE 'v' END);
    END IF;
    FOREACH col IN ARRAY agefacts.walk_columns_unindexed(graph_name, label_name, kind) LOOP
        BEGIN
            -- i_, s_ or e_ and the label's hash: apart from the key index's k_ name.
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (%I)',
                           left(col, 1) || '_' || md5(label_name), graph_name, label_name, col);
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        END;
    END LOOP;
END
$fn$;

-- Every label a load names, created where missing and indexed, in one call: the same steps
-- one label at a time cost a round trip each (a new graph's 18 labels: 150 ms against 80 ms
-- on the embedded engine). A label another client creates at the same moment fails this
-- call, and the client then goes one label at a time (agefacts.db.Database.ensure_labels).
CREATE OR REPLACE FUNCTION agefacts.ensure_labels(graph_name text, label_names text[], kinds text[])
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    FOR i IN 1 .. coalesce(array_length(label_names, 1), 0) LOOP
        IF NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
                       WHERE g.name = graph_name AND l.name = label_names[i]) THEN
            IF kinds[i] <> 'e' THEN
                PERFORM ag_catalog.create_vlabel(graph_name::cstring, label_names[i]::cstring);
            ELSE
                PERFORM ag_catalog.create_elabel(graph_name::cstring, label_names[i]::cstring);
            END IF;
        END IF;
        PERFORM agefacts.index_label(graph_name, label_names[i], kinds[i]);
    END LOOP;
END
$fn$;
