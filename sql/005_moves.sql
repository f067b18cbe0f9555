-- Namespaces moved to another server of a placement, or being moved (`agefacts move`): the note
-- a namespace leaves on the server it left. While its state is 'moving', writes to the namespace
-- are refused (the writer is told to send them again when the move is done); once 'moved', a
-- writer or reader that a placement not yet told of the move sends here follows `server`.
CREATE TABLE IF NOT EXISTS agefacts.moves (
    graph          text        NOT NULL,
    namespace      text        NOT NULL,
    server         text        NOT NULL,
    state          text        NOT NULL CHECK (state IN ('moving', 'moved')),
    noted_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (graph, namespace)
);

-- Every role that reads or writes a graph follows the notes: they name namespaces and servers.
GRANT SELECT ON agefacts.moves TO PUBLIC;
