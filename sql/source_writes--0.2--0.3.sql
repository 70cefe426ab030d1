/* source_writes--0.2--0.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION source_writes UPDATE TO '0.3'" to load this file. \quit

-- Source tables take CREATE INDEX from 0.3 on; psql's \d cannot list those
-- indexes, which index the table's hidden heap.
-- every index of a source table, the key index of an upsert source too,
-- shaped like pg_indexes: indexdef names the source table, not its hidden
-- heap, and can be run again as it is
CREATE VIEW source_writes.indexes AS
  SELECT n.nspname AS schemaname, t.relname AS tablename, i.relname AS indexname,
         ts.spcname AS tablespace,
         d.prefix || pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(t.relname)
           || pg_catalog.substr(d.def, pg_catalog.length(d.prefix) + pg_catalog.length(d.heap) + 1)
           AS indexdef
  FROM source_writes.source_tables s
  JOIN pg_catalog.pg_class t ON t.oid = s.relid
  JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
  JOIN pg_catalog.pg_class h ON h.oid = s.current_rel
  JOIN pg_catalog.pg_namespace hn ON hn.oid = h.relnamespace
  JOIN pg_catalog.pg_index x ON x.indrelid = h.oid
  JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
  LEFT JOIN pg_catalog.pg_tablespace ts ON ts.oid = i.reltablespace
  CROSS JOIN LATERAL (
    SELECT pg_catalog.pg_get_indexdef(i.oid) AS def,
           'CREATE ' || CASE WHEN x.indisunique THEN 'UNIQUE ' ELSE '' END
             || 'INDEX ' || pg_catalog.quote_ident(i.relname) || ' ON ' AS prefix,
           pg_catalog.quote_ident(hn.nspname) || '.' || pg_catalog.quote_ident(h.relname) AS heap
  ) d;
COMMENT ON VIEW source_writes.indexes IS
  'The indexes of source tables, as pg_indexes shows those of plain tables: indexdef names the source table';
GRANT SELECT ON source_writes.indexes TO PUBLIC;

-- CREATE INDEX in a session that had not loaded the library (indexes.c)
CREATE FUNCTION source_writes.on_ddl_command_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'source_writes_ddl_command_start'
LANGUAGE C;

CREATE EVENT TRIGGER source_writes_ddl_command_start ON ddl_command_start
  WHEN TAG IN ('CREATE INDEX')
  EXECUTE FUNCTION source_writes.on_ddl_command_start();

-- The writers' Avro schemas that Kafka workers fetched from schema
-- registries (format avro), by server and id, so that sessions decode kept
-- messages with them too (retry_errors()).  A cache, which the workers
-- fill again: not dumped.  Only the workers write here.
CREATE TABLE source_writes.avro_schemas (
    server      oid NOT NULL,       -- the foreign server naming the registry
    id          integer NOT NULL,   -- the schema's id in that registry
    registry    text NOT NULL,      -- the server's schema_registry when fetched
    schema      text NOT NULL,      -- the schema, as the registry gave it
    PRIMARY KEY (server, id)
);
COMMENT ON TABLE source_writes.avro_schemas IS
  'Writers'' Avro schemas fetched from schema registries, by server and schema id';

-- Each row keeps where it came from: the hidden heaps of existing sources
-- get the columns after their others (NULL in the rows they hold), and
-- blame(), history() and diff() read them.  A heap that a worker is
-- writing is left to the database's supervisor, which adds them as it
-- compacts (waiting here for the worker could deadlock with it, as the
-- update holds the catalog); so do ALTER FOREIGN TABLE and restores.
DO $$
DECLARE
  rel regclass;
  kind text;
BEGIN
  FOR rel, kind IN SELECT current_rel, s.kind FROM source_writes.source_tables s
                   UNION ALL SELECT history_rel, s.kind FROM source_writes.source_tables s
  LOOP
    BEGIN
      EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', rel);
      EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS "$part" integer, '
                     'ADD COLUMN IF NOT EXISTS "$pos" bigint', rel);
      IF kind = 'webhook' THEN
        EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS "$delivery" text COLLATE "C"',
                       rel);
      END IF;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;
END
$$;

CREATE FUNCTION source_writes.blame(source anyelement)
RETURNS TABLE (ts bigint, origin text, role name, xid xid8,
               "partition" integer, "offset" bigint,
               delivery text, received_at timestamptz, data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_blame'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.blame(anyelement) IS
  'Each current row of a source table (pass NULL::tbl) with the batch that wrote it and the message or delivery it came from';

CREATE FUNCTION source_writes.history(source anyelement)
RETURNS TABLE (valid_from bigint, valid_to bigint, origin text, role name, xid xid8,
               retracted_origin text, retracted_role name,
               "partition" integer, "offset" bigint,
               delivery text, received_at timestamptz, data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_history'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.history(anyelement) IS
  'Every retained version of the rows of a source table (pass NULL::tbl): when it was current, who wrote and retracted it, where it came from';

CREATE FUNCTION source_writes.raw_messages(source anyelement)
RETURNS TABLE (valid_from bigint, valid_to bigint,
               "partition" integer, "offset" bigint,
               delivery text, received_at timestamptz,
               key bytea, value bytea, "timestamp" bigint,
               header_names text[], header_values bytea[], data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_raw_messages'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.raw_messages(anyelement) IS
  'Every retained version of the rows of a source table with retain_raw (pass NULL::tbl) that keeps the message it came from, as it came';

CREATE FUNCTION source_writes.diff(source anyelement, from_ts bigint, to_ts bigint)
RETURNS TABLE (ts bigint, change text, origin text, role name, data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_diff'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.diff(anyelement, bigint, bigint) IS
  'The rows of a source table (pass NULL::tbl) added and removed between two readable times';

-- Moving a source: export() and import(), and the fence that a moved
-- source keeps, which the sources view shows
ALTER TABLE source_writes.source_tables
  ADD COLUMN moved boolean NOT NULL DEFAULT false;
CREATE OR REPLACE VIEW source_writes.sources WITH (security_barrier) AS
  SELECT s.relid AS source, s.kind,
         CASE WHEN s.moved THEN 'moved' ELSE coalesce(w.state, 'not running') END AS state,
         (s.f).upper, (s.f).since, w.lag, w.accepted, w.refused,
         (SELECT count(*) FROM source_writes.errors e WHERE e.source = s.relid) AS errors,
         w.last_error, w.worker_pid
  FROM (SELECT relid, kind, moved, source_writes.frontiers(relid) AS f
        FROM source_writes.source_tables
        WHERE pg_catalog.has_table_privilege(relid, 'SELECT')
        OFFSET 0) AS s
  LEFT JOIN source_writes.worker_status() w ON w.source = s.relid;
COMMENT ON VIEW source_writes.sources IS
  'The source tables the current role may read: kind, ingestion state, readable range [since, upper), lag, requests and errors';

CREATE FUNCTION source_writes.export(source regclass, fence boolean DEFAULT false)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'source_writes_export'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.export(regclass, boolean) IS
  'The retained log of a source table, its frontiers, offsets and idempotency keys, as lines for import(); with fence, the table takes no more writes once the caller commits';

CREATE FUNCTION source_writes.import(source regclass, lines regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'source_writes_import'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.import(regclass, regclass) IS
  'Load the lines of an export (the first column of table lines) into an empty source table of the same columns; returns the rows imported';

-- Batches rolled up into segments: once every batch of a range of a source
-- has committed long enough ago for every snapshot to see it, compaction
-- replaces the range's rows of source_writes.batches by one row here.  A
-- segment keeps each batch's id and timestamp, packed as deltas (about a
-- byte a batch), its origin and role as an index into the segment's
-- dictionary of (origin, role) pairs, and where the batches wrote rows,
-- merged.  The segments of a source cover disjoint ranges of timestamps,
-- all before those of its batch rows.
CREATE TABLE source_writes.batch_segments (
    source      regclass NOT NULL,  -- the source table
    ts_from     bigint NOT NULL,    -- the oldest and newest timestamps of its batches
    ts_to       bigint NOT NULL,
    batch_from  bigint NOT NULL,    -- the lowest and highest of their ids
    batch_to    bigint NOT NULL,
    nbatches    integer NOT NULL,   -- how many batches it holds
    origins     text[] NOT NULL,    -- its dictionary: (origins[i], roles[i])
    roles       name[] NOT NULL,
    batches     bytea NOT NULL,     -- the batches' ids, timestamps and kinds, packed
    xid         xid8 NOT NULL,      -- the transaction that rolled them up
    current_file   oid,             -- where the batches wrote rows, merged, as
    current_blocks bigint[],        -- in source_writes.batches
    history_file   oid,
    history_blocks bigint[],
    current_chunks bigint[]         -- per 256 batches in ts order: their newest
                                    -- ts, n, and n <= 2 [from, to) pairs of the
                                    -- current heap's blocks (6 values each)
);
CREATE INDEX batch_segments_source_ts ON source_writes.batch_segments (source, ts_to);
COMMENT ON TABLE source_writes.batch_segments IS
  'Committed batches of a source table rolled up into segments: their ids, timestamps, origins and roles, packed';
SELECT pg_catalog.pg_extension_config_dump('source_writes.batch_segments', '');

-- Edits of a source table that a new version of it (option version_of)
-- could not carry: a row a person added that the version's columns do
-- not take, and the later changes to it.  Whoever may read the version
-- reads them, whoever may delete from it deletes them.
CREATE TABLE source_writes.uncarried_edits (
    source      regclass NOT NULL,  -- the new version
    version_of  text NOT NULL,      -- the table the edit was made on, as named then
    ts          bigint NOT NULL,    -- the edit's timestamp (its batch's)
    role        name NOT NULL,      -- who made it
    edit        text NOT NULL,      -- 'insert' or 'delete' (of the row)
    "row"       jsonb NOT NULL,     -- the row, as the old table has it
    reason      text NOT NULL       -- why the new version does not take it
);
CREATE INDEX uncarried_edits_source ON source_writes.uncarried_edits (source);
ALTER TABLE source_writes.uncarried_edits ENABLE ROW LEVEL SECURITY;
CREATE POLICY readers ON source_writes.uncarried_edits FOR SELECT
  USING (pg_catalog.has_table_privilege(source, 'SELECT'));
CREATE POLICY deleters ON source_writes.uncarried_edits FOR DELETE
  USING (pg_catalog.has_table_privilege(source, 'DELETE'));
GRANT SELECT, DELETE ON source_writes.uncarried_edits TO PUBLIC;
COMMENT ON TABLE source_writes.uncarried_edits IS
  'Edits that a new version of a source table could not carry, with the reason';
SELECT pg_catalog.pg_extension_config_dump('source_writes.uncarried_edits', '');
