-- agefacts' own SQL objects, beside the graphs it writes. Every statement is idempotent:
-- it runs on every connection, and a second run changes nothing.
CREATE SCHEMA IF NOT EXISTS agefacts;

-- The ingest log: one row per loaded conversation and graph. Wall-clock times, content
-- hashes and counts live here and never on graph elements, so a replay cannot change the graph.
CREATE TABLE IF NOT EXISTS agefacts.ingest_log (
    graph          text        NOT NULL,
    namespace      text        NOT NULL,
    conversation   text        NOT NULL,
    content_hash   text        NOT NULL,
    counts         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    source         text,
    loaded_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (graph, namespace, conversation)
);

-- Each conversation as it was loaded (its JSON as pydantic writes it, the text its content
-- hash is taken from): what `agefacts export` writes and what a memory extends with new
-- messages. Deleted with its row when the conversation is forgotten.
ALTER TABLE agefacts.ingest_log ADD COLUMN IF NOT EXISTS document text;

-- Turns a memory appended to a conversation since it was last loaded whole, each turn's JSON
-- by its place in the conversation: an add writes its new turns here, not the whole document
-- again. The conversation as loaded is its document with these turns after its own; a load of
-- the whole conversation folds them back into the document.
CREATE TABLE IF NOT EXISTS agefacts.ingest_turns (
    graph          text        NOT NULL,
    namespace      text        NOT NULL,
    conversation   text        NOT NULL,
    ordinal        int         NOT NULL,
    turn           text        NOT NULL,
    PRIMARY KEY (graph, namespace, conversation, ordinal)
);

-- A table of agefacts' made after the ingest log: a role granted the ingest log before the
-- table existed may do the same there.
CREATE OR REPLACE FUNCTION agefacts.grant_as_ingest_log(table_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.grantee::regrole AS who, string_agg(DISTINCT a.privilege_type, ', ') AS what
             FROM pg_catalog.pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = 'agefacts.ingest_log'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
               AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
             GROUP BY a.grantee LOOP
        EXECUTE format('GRANT %s ON agefacts.%I TO %s', g.what, table_name, g.who);
    END LOOP;
END
$fn$;

SELECT agefacts.grant_as_ingest_log('ingest_turns');

-- The question queue: follow-ups are the caller's questions, not facts about the world.
-- A follow-up whose gap a later load fills is marked resolved.
CREATE TABLE IF NOT EXISTS agefacts.questions (
    graph          text        NOT NULL,
    namespace      text        NOT NULL,
    conversation   text        NOT NULL,
    gap            text        NOT NULL,
    entity_key     text,
    priority       text        NOT NULL,
    question       text        NOT NULL,
    reason         text,
    asked_at       text,
    resolved_at    text,
    PRIMARY KEY (graph, namespace, conversation, gap)
);

-- Which version of these files set the database up: a connection that finds its own version
-- here runs no DDL at all.
CREATE TABLE IF NOT EXISTS agefacts.schema_version (
    id             int         PRIMARY KEY CHECK (id = 1),
    version        text        NOT NULL
);

-- The ontology each graph was last loaded with (its JSON, and a hash of that JSON), so that
-- reads judge facts by it without being given it again. Written once per load when it differs,
-- outside the load's transactions (a row every batch updated would serialise loaders).
CREATE TABLE IF NOT EXISTS agefacts.graph_ontology (
    graph          text        PRIMARY KEY,
    ontology       jsonb       NOT NULL,
    digest         text        NOT NULL,
    loaded_at      timestamptz NOT NULL DEFAULT now()
);

-- A namespace's key space: the 16 hex digits after the kind in each of its keys
-- (agefacts.keys.key_space, which makes them); and whether a key (text, or none) lies in it.
CREATE OR REPLACE FUNCTION agefacts.key_space(ns text)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT left(encode(sha256(convert_to(ns, 'UTF8')), 'hex'), 16)
$fn$;

CREATE OR REPLACE FUNCTION agefacts.key_in(k text, ns text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT k IS NULL OR (ns IS NOT NULL AND substr(k, strpos(k, ':') + 1, 16) = agefacts.key_space(ns))
$fn$;
