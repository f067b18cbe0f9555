-- What a memory's model answered for a person's message (or why it could not), kept before the
-- message is written: a process killed between the reply and the write, or a write that
-- failed, leaves it here, and the add made again takes it instead of paying for it twice. A
-- row goes once its message is written. Keyed by the message's text (sha-256) within its
-- conversation, as a memory keeps what one add paid for.
CREATE TABLE IF NOT EXISTS agefacts.extractions (
    graph          text        NOT NULL,
    namespace      text        NOT NULL,
    conversation   text        NOT NULL,
    said           text        NOT NULL,
    turn           text        NOT NULL,
    model          text,
    paid_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (graph, namespace, conversation, said)
);

-- A role granted the ingest log before this table existed may do the same here.
DO $grants$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.grantee::regrole AS who, string_agg(DISTINCT a.privilege_type, ', ') AS what
             FROM pg_catalog.pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = 'agefacts.ingest_log'::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
               AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
             GROUP BY a.grantee LOOP
        EXECUTE format('GRANT %s ON agefacts.extractions TO %s', g.what, g.who);
    END LOOP;
END
$grants$;

-- Kept to tenants from the moment it is made, as the ingest log is once a tenant is set up.
SELECT agefacts.protect_table('extractions');
