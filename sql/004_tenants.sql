-- Tenants: roles the database itself keeps to one namespace of a graph, by row-level security
-- on every label table and on agefacts' own tables (`agefacts setup --tenant ROLE=NAMESPACE`).
--
-- Measured before relying on it (docs/servers.md): AGE's cypher() applies a label table's
-- policies to what MATCH reads on AGE 1.6.0, 1.7.0 and 1.8.0, and to CREATE, SET and DELETE
-- from 1.7.0 (1.6.0 writes past them, so setup refuses tenants there). A role that is no
-- tenant of the graph (its owner, a loader, a reader) sees every row, as before; the table
-- owner and superusers are not subject to policies at all.

CREATE TABLE IF NOT EXISTS agefacts.tenants (
    graph          text        NOT NULL,
    role           text        NOT NULL,
    namespace      text        NOT NULL,
    PRIMARY KEY (graph, role)
);
-- A tenant reads its own row only (the policies below ask it who it is), never who else is one.
ALTER TABLE agefacts.tenants ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS agefacts_self ON agefacts.tenants;
CREATE POLICY agefacts_self ON agefacts.tenants USING (role = current_user);
GRANT SELECT ON agefacts.tenants TO PUBLIC;

-- Whether this role is a tenant (of any graph: a tenant of one graph sees nothing of another's,
-- where it saw every row of graphs it was no tenant of); and whether it may see a namespace's rows.
CREATE OR REPLACE FUNCTION agefacts.is_tenant(graph_name text)
RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT EXISTS (SELECT 1 FROM agefacts.tenants t WHERE t.role = current_user)
$fn$;

CREATE OR REPLACE FUNCTION agefacts.sees(graph_name text, ns text)
RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT NOT agefacts.is_tenant(graph_name)
        OR EXISTS (SELECT 1 FROM agefacts.tenants t
                   WHERE t.graph = graph_name AND t.role = current_user AND t.namespace = ns)
$fn$;

-- A table of rows by graph and namespace kept to its tenants (what message_vectors is made
-- with when embeddings are first used, and the logs at setup).
CREATE OR REPLACE FUNCTION agefacts.protect_table(table_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    -- Missing, or not this role's to change (its owner, or setup, protects it).
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                   WHERE c.oid = to_regclass(format('agefacts.%I', table_name))
                     AND pg_catalog.pg_has_role(c.relowner, 'USAGE')) THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE agefacts.%I ENABLE ROW LEVEL SECURITY', table_name);
    EXECUTE format('DROP POLICY IF EXISTS agefacts_tenant ON agefacts.%I', table_name);
    EXECUTE format('CREATE POLICY agefacts_tenant ON agefacts.%I USING (agefacts.sees(graph, namespace))', table_name);
END
$fn$;

-- One label kept to its tenants: a vertex by its namespace property, an edge by its start
-- vertex (which the vertices' own policy decides). Also the labels' parents, through which
-- MATCH (n) without a label reads. Idempotent; run by its owner.
-- What a tenant writes must also carry a key of its own namespace's space (agefacts.key_in;
-- an edge: of its start's namespace), or none: keys are computable and unique in the graph, so a key of another
-- namespace's space would be refused when held and taken when not, telling the tenant what
-- another person said, and taking it first would block their load of it. Checked before the
-- key index, this refuses such a key alike whether it is held or not.
CREATE OR REPLACE FUNCTION agefacts.protect_label(graph_name text, label_name text, kind text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('ALTER TABLE %I.%I ENABLE ROW LEVEL SECURITY', graph_name, label_name);
    EXECUTE format('DROP POLICY IF EXISTS agefacts_tenant ON %I.%I', graph_name, label_name);
    IF kind = 'e' THEN
        EXECUTE format(
            'CREATE POLICY agefacts_tenant ON %I.%I USING (NOT agefacts.is_tenant(%L) OR EXISTS '
            '(SELECT 1 FROM %I._ag_label_vertex v WHERE v.id = start_id)) '
            'WITH CHECK (NOT agefacts.is_tenant(%L) OR EXISTS '
            '(SELECT 1 FROM %I._ag_label_vertex v WHERE v.id = start_id AND agefacts.key_in('
            -- The edge's own properties, by its table's name (bare, they are the vertex's).
            'ag_catalog.agtype_object_field_text(%I.properties, ''k''), '
            'ag_catalog.agtype_object_field_text(v.properties, ''namespace''))))',
            graph_name, label_name, graph_name, graph_name, graph_name, graph_name, label_name);
    ELSE
        EXECUTE format(
            'CREATE POLICY agefacts_tenant ON %I.%I USING (agefacts.sees(%L, '
            'ag_catalog.agtype_object_field_text(properties, ''namespace''))) '
            'WITH CHECK (agefacts.sees(%L, ag_catalog.agtype_object_field_text(properties, ''namespace'')) '
            'AND (NOT agefacts.is_tenant(%L) OR agefacts.key_in('
            'ag_catalog.agtype_object_field_text(properties, ''k''), '
            'ag_catalog.agtype_object_field_text(properties, ''namespace''))))',
            graph_name, label_name, graph_name, graph_name, graph_name);
    END IF;
END
$fn$;

-- A label's policy where it has none yet (a label made after setup): a tenant's load meets
-- every label of its ontology protected already, and may not alter a table it does not own.
CREATE OR REPLACE FUNCTION agefacts.protect_new_label(graph_name text, label_name text, kind text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_policies p
               WHERE p.schemaname = graph_name AND p.tablename = label_name AND p.policyname = 'agefacts_tenant'
                 AND p.with_check IS NOT NULL)
       AND (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
            WHERE c.oid = format('%I.%I', graph_name, label_name)::regclass) THEN
        RETURN;
    END IF;
    PERFORM agefacts.protect_label(graph_name, label_name, kind);
END
$fn$;

CREATE OR REPLACE FUNCTION agefacts.protect_graph(graph_name text)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    l record;
    t text;
BEGIN
    FOR l IN SELECT lb.name, lb.kind FROM ag_catalog.ag_label lb JOIN ag_catalog.ag_graph g ON g.graphid = lb.graph
             WHERE g.name = graph_name ORDER BY lb.name LOOP
        PERFORM agefacts.protect_label(graph_name, l.name, l.kind);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['ingest_log', 'ingest_turns', 'questions', 'message_vectors', 'extractions'] LOOP
        PERFORM agefacts.protect_table(t);
    END LOOP;
END
$fn$;
