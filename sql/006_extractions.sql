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

SELECT agefacts.grant_as_ingest_log('extractions');

-- Kept to tenants from the moment it is made, as the ingest log is once a tenant is set up.
SELECT agefacts.protect_table('extractions');
