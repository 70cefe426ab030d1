/* source_writes--0.3.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION source_writes" to load this file. \quit

-- The schema source_writes holds what users call and read.
-- source_writes_internal holds the hidden relations that store the rows of
-- source tables; nobody but their owners may use it.  Both are members of
-- the extension and go with it.
CREATE SCHEMA source_writes;
GRANT USAGE ON SCHEMA source_writes TO PUBLIC;
CREATE SCHEMA source_writes_internal;
REVOKE ALL ON SCHEMA source_writes_internal FROM PUBLIC;

-- the foreign data wrapper
CREATE FUNCTION source_writes.fdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME', 'source_writes_fdw_handler'
LANGUAGE C STRICT;

CREATE FUNCTION source_writes.fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_fdw_validator'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER source_writes
  HANDLER source_writes.fdw_handler
  VALIDATOR source_writes.fdw_validator;

-- One row per source table: its kind, hidden relations and the frontiers
-- it keeps (its upper moves with the batches it commits, see below).  The
-- catalog is the extension's; others read it through the view
-- source_writes.sources, which shows each role the tables it may read.
CREATE TABLE source_writes.source_tables (
    relid       regclass PRIMARY KEY,   -- the foreign table
    kind        text NOT NULL CHECK (kind IN ('kafka', 'webhook')),
    current_rel regclass NOT NULL,      -- hidden heap of current rows
    history_rel regclass NOT NULL,      -- hidden heap of retracted rows
    upper       bigint NOT NULL,        -- the upper before its first batch (ms)
    since       bigint NOT NULL,        -- earliest readable timestamp (ms), at least
    retain      bigint NOT NULL,        -- retain_history (ms, -1 for ever) it follows
    moved       boolean NOT NULL DEFAULT false  -- exported with a fence: takes no writes
);
COMMENT ON TABLE source_writes.source_tables IS
  'One row per source table: its kind, hidden relations and frontiers';

-- One row per committed batch of a source: the log's timestamps and who
-- wrote what.  Batch ids come from a sequence and are never reused.  A
-- batch also names the earlier batches of its source that were still
-- committing when it got its timestamp: with them, a snapshot that sees a
-- batch knows whether it sees every batch before it (its upper).  And it
-- names where in its hidden heaps it wrote rows, so that reading the log
-- from a time on reads those blocks only.
CREATE SEQUENCE source_writes.batch_ids;
CREATE TABLE source_writes.batches (
    source  regclass NOT NULL,  -- the source table
    batch   bigint NOT NULL,    -- the batch's id, in "$batch" and "$retracted"
    ts      bigint NOT NULL,    -- the batch's timestamp (ms since the epoch)
    origin  text NOT NULL CHECK (origin IN ('user', 'kafka', 'webhook', 'system')),
    role    name NOT NULL,      -- the role that wrote it, as it was named then
    xid     xid8 NOT NULL,      -- the transaction that wrote it
    pending_ts  bigint[],       -- earlier batches still committing at its stamp:
    pending_xid xid8[],         -- their timestamps and transactions
    current_file   oid,         -- the current heap's file it wrote rows into,
    current_blocks bigint[],    -- and the ranges of blocks, [from, to) pairs;
    history_file   oid,         -- the same for the history heap
    history_blocks bigint[]
);
CREATE INDEX batches_source_ts ON source_writes.batches (source, ts);
COMMENT ON TABLE source_writes.batches IS
  'One row per committed batch of a source table: its timestamp, origin and role';

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

-- How far each writer that consumes a stream (a Kafka partition) has got:
-- the next offset it expects.  Moved by the batch that consumed the offsets
-- before it, with a compare-and-set when the batch is stamped, so that a
-- second writer of the same partition can never commit the same offsets.
-- A partition's progress remembers what it is a position in (the topic and
-- the Kafka cluster), why ingestion stopped following it if it did, and
-- how many of its offsets the brokers deleted before they were ingested.
-- A stored offset is never followed into another topic or cluster: the
-- worker stops until reset_offsets() says where to go on.
CREATE TABLE source_writes.progress (
    source      regclass NOT NULL,  -- the source table
    part        integer NOT NULL,   -- the partition
    next_offset bigint NOT NULL,    -- the first offset not yet consumed
    topic       text,               -- the topic the offset is a position in
    cluster_id  text,               -- the Kafka cluster's id; NULL until known
    lost        bigint NOT NULL DEFAULT 0,  -- offsets deleted before they were ingested
    stopped     text                -- why the offset is not followed; NULL while it is
      CHECK (stopped IN ('cluster changed', 'offsets past the end')),
    PRIMARY KEY (source, part)
);
COMMENT ON TABLE source_writes.progress IS
  'The next offset each partition of a source expects, in which topic and cluster, moved with each batch that consumed offsets';

-- Messages that a worker could not decode (bad JSON, a value of the wrong
-- type or too long, a null key ...), kept with the reason so that nothing
-- is lost: their offsets count as consumed, and retry_errors() moves the
-- ones that decode into the table once it has been fixed.  Whoever may
-- read a source reads its errors, whoever may delete from it deletes them.
CREATE TABLE source_writes.errors (
    source      regclass NOT NULL,  -- the source table
    ts          bigint NOT NULL,    -- when it was kept (ms since the epoch)
    partition   integer,            -- where the message was
    "offset"    bigint,
    key         bytea,              -- the message as it came
    value       bytea,
    error       text NOT NULL,      -- why it could not be decoded
    "timestamp" bigint,             -- the message's timestamp (ms), if any,
    header_names  text[],           -- and its headers, for retry_errors()
    header_values bytea[]
);
CREATE INDEX errors_source ON source_writes.errors (source, partition, "offset");
ALTER TABLE source_writes.errors ENABLE ROW LEVEL SECURITY;
CREATE POLICY readers ON source_writes.errors FOR SELECT
  USING (pg_catalog.has_table_privilege(source, 'SELECT'));
CREATE POLICY deleters ON source_writes.errors FOR DELETE
  USING (pg_catalog.has_table_privilege(source, 'DELETE'));
GRANT SELECT, DELETE ON source_writes.errors TO PUBLIC;
COMMENT ON TABLE source_writes.errors IS
  'Messages that could not be decoded into their source table, with the reason';

-- Deliveries to webhook sources that carried an idempotency key (the
-- header named by the table's idempotency_header): a later delivery with
-- the same key writes nothing and gets the first one's answer.  A key is
-- kept while the source's history reaches back to it: compaction forgets
-- the keys received before since.  Only the webhook worker writes here.
CREATE TABLE source_writes.deliveries (
    source      regclass NOT NULL,  -- the source table
    key         text COLLATE "C" NOT NULL,  -- the idempotency key, as it came
    ts          bigint NOT NULL,    -- when it was received (ms since the epoch)
    body_sha256 bytea NOT NULL,     -- of the body it came with
    rows        integer NOT NULL,   -- how many rows it wrote
    PRIMARY KEY (source, key)
);
CREATE INDEX deliveries_source_ts ON source_writes.deliveries (source, ts);
COMMENT ON TABLE source_writes.deliveries IS
  'Idempotency keys of deliveries to webhook sources, kept while the history reaches back to them';

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

-- pg_dump keeps the catalog's contents; the hidden relations are dumped as
-- tables of source_writes_internal, and a catalog row restored by pg_restore
-- gives them back to their source table (see the trigger below).
SELECT pg_catalog.pg_extension_config_dump('source_writes.source_tables', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.batches', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.batch_ids', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.progress', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.errors', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.deliveries', '');

CREATE FUNCTION source_writes.restore_catalog_row()
RETURNS trigger
AS 'MODULE_PATHNAME', 'source_writes_restore_catalog_row'
LANGUAGE C;
CREATE TRIGGER restore BEFORE INSERT ON source_writes.source_tables
  FOR EACH ROW EXECUTE FUNCTION source_writes.restore_catalog_row();

-- reading sources: frontiers, the log, notifications, compaction
CREATE FUNCTION source_writes.frontiers(source regclass, OUT since bigint, OUT upper bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'source_writes_frontiers'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.frontiers(regclass) IS
  'The readable range [since, upper) of a source table, in ms since the Unix epoch';

-- the source tables a role may read, with their frontiers
-- what the workers that ingest sources report (shared memory), for the
-- sources the current role may read: a Kafka source's lag, a webhook
-- source's requests answered 200 (accepted) and otherwise (refused)
CREATE FUNCTION source_writes.worker_status(OUT source regclass, OUT state text,
                                            OUT last_error text, OUT worker_pid integer,
                                            OUT lag bigint, OUT accepted bigint,
                                            OUT refused bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'source_writes_worker_status'
LANGUAGE C STRICT VOLATILE;
CREATE FUNCTION source_writes.partition_status(OUT source regclass, OUT partition integer,
                                               OUT next_offset bigint,
                                               OUT high_watermark bigint,
                                               OUT worker_pid integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'source_writes_partition_status'
LANGUAGE C STRICT VOLATILE;

-- the source tables a role may read, with their frontiers and ingestion
CREATE VIEW source_writes.sources WITH (security_barrier) AS
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
GRANT SELECT ON source_writes.sources TO PUBLIC;

-- the partitions of the Kafka sources a role may read, as their workers
-- report them, with the offsets lost to retention
CREATE VIEW source_writes.partitions WITH (security_barrier) AS
  SELECT p.source, p.partition, p.next_offset, p.high_watermark,
         greatest(p.high_watermark - p.next_offset, 0) AS lag, p.worker_pid,
         coalesce(pr.lost, 0) AS lost
  FROM source_writes.partition_status() p
  LEFT JOIN source_writes.progress pr
    ON pr.source = p.source AND pr.part = p.partition;
COMMENT ON VIEW source_writes.partitions IS
  'Per partition of the Kafka sources the current role may read: the next offset to ingest, the high watermark, and the offsets lost to retention';
GRANT SELECT ON source_writes.partitions TO PUBLIC;

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

CREATE FUNCTION source_writes.wait_for(source regclass,
                                       timeout interval DEFAULT '30 s')
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_wait_for'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.wait_for(regclass, interval) IS
  'Wait until a Kafka source has ingested everything its topic held when called; an error after the timeout';

CREATE FUNCTION source_writes.reset_offsets(source regclass, offsets text)
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_reset_offsets'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.reset_offsets(regclass, text) IS
  'Set where a Kafka source goes on ingesting: earliest, latest or offsets of partitions (''0:1200, 1:800''); logged as a batch of origin system';

CREATE FUNCTION source_writes.retry_errors(source regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'source_writes_retry_errors'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.retry_errors(regclass) IS
  'Decode the kept errors of a source again and move those that now decode into it; returns how many moved';

CREATE FUNCTION source_writes.updates(source anyelement,
                                      since bigint DEFAULT NULL,
                                      until bigint DEFAULT NULL)
RETURNS TABLE (ts bigint, diff integer, origin text, role name, data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_updates'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.updates(anyelement, bigint, bigint) IS
  'The log of a source table (pass NULL::tbl): its updates with since <= ts < until, in ts order';

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

CREATE FUNCTION source_writes.channel(source regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'source_writes_channel'
LANGUAGE C STRICT STABLE;
COMMENT ON FUNCTION source_writes.channel(regclass) IS
  'The NOTIFY channel on which each new batch of a source table announces its upper';

CREATE FUNCTION source_writes.compact(source regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'source_writes_compact'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.compact(regclass) IS
  'Deletes the history retracted before since, which no readable time needs; returns the rows deleted';

-- storage follows DDL on source tables through event triggers
CREATE FUNCTION source_writes.on_ddl_command_end()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'source_writes_ddl_command_end'
LANGUAGE C;

CREATE FUNCTION source_writes.on_sql_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'source_writes_sql_drop'
LANGUAGE C;

CREATE EVENT TRIGGER source_writes_ddl_command_end ON ddl_command_end
  WHEN TAG IN ('CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'ALTER TABLE',
               'CREATE SERVER', 'ALTER SERVER',
               'CREATE USER MAPPING', 'ALTER USER MAPPING', 'ALTER DOMAIN')
  EXECUTE FUNCTION source_writes.on_ddl_command_end();

CREATE EVENT TRIGGER source_writes_sql_drop ON sql_drop
  EXECUTE FUNCTION source_writes.on_sql_drop();

-- CREATE INDEX in a session that had not loaded the library (indexes.c)
CREATE FUNCTION source_writes.on_ddl_command_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'source_writes_ddl_command_start'
LANGUAGE C;

CREATE EVENT TRIGGER source_writes_ddl_command_start ON ddl_command_start
  WHEN TAG IN ('CREATE INDEX')
  EXECUTE FUNCTION source_writes.on_ddl_command_start();

-- say at once when the workers cannot run
CREATE FUNCTION source_writes.warn_unless_preloaded()
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_warn_unless_preloaded'
LANGUAGE C;
REVOKE EXECUTE ON FUNCTION source_writes.warn_unless_preloaded() FROM PUBLIC;
SELECT source_writes.warn_unless_preloaded();
