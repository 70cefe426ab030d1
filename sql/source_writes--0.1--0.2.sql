/* source_writes--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION source_writes UPDATE TO '0.2'" to load this file. \quit

-- Temporary source tables are refused from 0.2 on.  Under 0.1 they could
-- be made, and the end of their session dropped the table and its hidden
-- heaps but left its rows in the catalog (a table made later with the same
-- OID would have found them).  Those rows go.
DELETE FROM source_writes.batches b
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = b.source);
DELETE FROM source_writes.progress p
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = p.source);
DELETE FROM source_writes.errors e
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = e.source);
DELETE FROM source_writes.deliveries d
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = d.source);
DELETE FROM source_writes.source_tables s
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);

-- Offsets that cannot skip data: a partition's progress remembers what it
-- is a position in (the topic and the Kafka cluster), why ingestion stopped
-- following it if it did, and how many of its offsets the brokers deleted
-- before they were ingested.  A stored offset is never followed into
-- another topic or cluster: the worker stops until reset_offsets() says
-- where to go on.
ALTER TABLE source_writes.progress
  ADD COLUMN topic text,          -- the topic the offset is a position in
  ADD COLUMN cluster_id text,     -- the Kafka cluster's id; NULL until known
  ADD COLUMN lost bigint NOT NULL DEFAULT 0,  -- offsets deleted before they were ingested
  ADD COLUMN stopped text         -- why the offset is not followed; NULL while it is
    CHECK (stopped IN ('cluster changed', 'offsets past the end'));
COMMENT ON TABLE source_writes.progress IS
  'The next offset each partition of a source expects, in which topic and cluster, moved with each batch that consumed offsets';

-- the offsets stored by 0.1 are positions in the topic the table names now
UPDATE source_writes.progress p
  SET topic = o.option_value
  FROM pg_catalog.pg_foreign_table ft,
       pg_catalog.pg_options_to_table(ft.ftoptions) o
  WHERE ft.ftrelid = p.source AND o.option_name = 'topic';

CREATE OR REPLACE VIEW source_writes.partitions WITH (security_barrier) AS
  SELECT p.source, p.partition, p.next_offset, p.high_watermark,
         greatest(p.high_watermark - p.next_offset, 0) AS lag, p.worker_pid,
         coalesce(pr.lost, 0) AS lost
  FROM source_writes.partition_status() p
  LEFT JOIN source_writes.progress pr
    ON pr.source = p.source AND pr.part = p.partition;
COMMENT ON VIEW source_writes.partitions IS
  'Per partition of the Kafka sources the current role may read: the next offset to ingest, the high watermark, and the offsets lost to retention';

CREATE FUNCTION source_writes.reset_offsets(source regclass, offsets text)
RETURNS void
AS 'MODULE_PATHNAME', 'source_writes_reset_offsets'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION source_writes.reset_offsets(regclass, text) IS
  'Set where a Kafka source goes on ingesting: earliest, latest or offsets of partitions (''0:1200, 1:800''); logged as a batch of origin system';
