-- Whether the graph holds keys of the form agefacts wrote before keys carried their
-- namespace's space (`<kind>:<32 hex>`): a graph written so is read and loaded by those keys
-- only after `agefacts migrate` (agefacts.migrate). One conversation's key tells: every key of
-- a graph has one form.
CREATE OR REPLACE FUNCTION agefacts.keys_stale(graph_name text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    k text;
BEGIN
    IF NOT agefacts.relation_exists(graph_name, 'Conversation') THEN
        RETURN false;
    END IF;
    EXECUTE format('SELECT ag_catalog.agtype_object_field_text(properties, %L) FROM %I.%I LIMIT 1',
                   'k', graph_name, 'Conversation') INTO k;
    RETURN k IS NOT NULL AND length(k) - strpos(k, ':') = 32;
END
$fn$;
