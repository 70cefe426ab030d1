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
