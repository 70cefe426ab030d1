/* source_writes--0.1.sql */

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
    retain      bigint NOT NULL         -- retain_history (ms, -1 for ever) it follows
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

-- How far each writer that consumes a stream (a Kafka partition) has got:
-- the next offset it expects.  Moved by the batch that consumed the offsets
-- before it, with a compare-and-set when the batch is stamped, so that a
-- second writer of the same partition can never commit the same offsets.
CREATE TABLE source_writes.progress (
    source      regclass NOT NULL,  -- the source table
    part        integer NOT NULL,   -- the partition
    next_offset bigint NOT NULL,    -- the first offset not yet consumed
    PRIMARY KEY (source, part)
);
COMMENT ON TABLE source_writes.progress IS
  'The next offset each partition of a source expects, moved with each batch that consumed offsets';

-- pg_dump keeps the catalog's contents; the hidden relations are dumped as
-- tables of source_writes_internal, and a catalog row restored by pg_restore
-- gives them back to their source table (see the trigger below).
SELECT pg_catalog.pg_extension_config_dump('source_writes.source_tables', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.batches', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.batch_ids', '');
SELECT pg_catalog.pg_extension_config_dump('source_writes.progress', '');

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
CREATE VIEW source_writes.sources WITH (security_barrier) AS
  SELECT relid, kind, (f).since, (f).upper
  FROM (SELECT relid, kind, source_writes.frontiers(relid) AS f
        FROM source_writes.source_tables
        WHERE pg_catalog.has_table_privilege(relid, 'SELECT')
        OFFSET 0) AS s;
COMMENT ON VIEW source_writes.sources IS
  'The source tables the current role may read: kind and readable range [since, upper)';
GRANT SELECT ON source_writes.sources TO PUBLIC;

CREATE FUNCTION source_writes.updates(source anyelement,
                                      since bigint DEFAULT NULL,
                                      until bigint DEFAULT NULL)
RETURNS TABLE (ts bigint, diff integer, origin text, role name, data anyelement)
AS 'MODULE_PATHNAME', 'source_writes_updates'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION source_writes.updates(anyelement, bigint, bigint) IS
  'The log of a source table (pass NULL::tbl): its updates with since <= ts < until, in ts order';

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

-- say at once when the workers cannot run
CREATE FUNCTION source_writes.warn_unless_preloaded()
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_warn_unless_preloaded'
LANGUAGE C;
REVOKE EXECUTE ON FUNCTION source_writes.warn_unless_preloaded() FROM PUBLIC;
SELECT source_writes.warn_unless_preloaded();
