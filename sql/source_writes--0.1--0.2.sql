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

-- Memory caps of librdkafka's buffers: version 0.1 let any role with USAGE
-- on a Kafka server set them as high as librdkafka allows (gigabytes of
-- prefetched messages per worker) in its user mapping, and accepted
-- isolation.level, which source_writes sets itself now.  Who set a value is
-- not recorded, so a value above the cap for roles that are not superusers
-- is dropped where such a role could have set it, with a WARNING (a
-- superuser may set it again): in the user mappings of roles that are not
-- superusers, and in the servers (and PUBLIC user mappings) of owners that
-- are not superusers.  isolation.level is dropped everywhere: ingestion
-- reads committed messages only.
DO $$
DECLARE
  caps constant jsonb := '{
    "rdkafka.queued.max.messages.kbytes": 8192,
    "rdkafka.queued.min.messages": 100000,
    "rdkafka.fetch.max.bytes": 8388608,
    "rdkafka.fetch.message.max.bytes": 8388608,
    "rdkafka.max.partition.fetch.bytes": 8388608,
    "rdkafka.receive.message.max.bytes": 100000000}';
  obj record;
  opt record;
  drops text[];
  capped text[];
  what text;
BEGIN
  FOR obj IN
    SELECT s.srvname, NULL::oid AS umuser, s.srvoptions AS options,
           NOT r.rolsuper AS untrusted, true AS is_server
      FROM pg_catalog.pg_foreign_server s
      JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw
      JOIN pg_catalog.pg_roles r ON r.oid = s.srvowner
     WHERE w.fdwname = 'source_writes'
    UNION ALL
    SELECT s.srvname, m.umuser, m.umoptions,
           NOT coalesce(ur.rolsuper, sr.rolsuper), false
      FROM pg_catalog.pg_user_mapping m
      JOIN pg_catalog.pg_foreign_server s ON s.oid = m.umserver
      JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw
      JOIN pg_catalog.pg_roles sr ON sr.oid = s.srvowner
      LEFT JOIN pg_catalog.pg_roles ur ON ur.oid = m.umuser
     WHERE w.fdwname = 'source_writes'
  LOOP
    drops := '{}';
    capped := '{}';
    FOR opt IN SELECT option_name, option_value
                 FROM pg_catalog.pg_options_to_table(obj.options)
    LOOP
      IF opt.option_name = 'rdkafka.isolation.level' THEN
        drops := drops || opt.option_name;
      ELSIF obj.untrusted AND caps ? opt.option_name
            AND opt.option_value ~ '^[0-9]+$'
            AND opt.option_value::numeric > (caps ->> opt.option_name)::numeric THEN
        drops := drops || opt.option_name;
        capped := capped || opt.option_name;
      END IF;
    END LOOP;
    CONTINUE WHEN drops = '{}';
    what := CASE WHEN obj.is_server
                 THEN pg_catalog.format('server %I', obj.srvname)
                 ELSE pg_catalog.format('user mapping for %s on server %I',
                        CASE WHEN obj.umuser = 0 THEN 'PUBLIC'
                             ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(obj.umuser)) END,
                        obj.srvname) END;
    BEGIN
      EXECUTE pg_catalog.format('ALTER %s OPTIONS (%s)',
        CASE WHEN obj.is_server
             THEN pg_catalog.format('SERVER %I', obj.srvname)
             ELSE pg_catalog.format('USER MAPPING FOR %s SERVER %I',
                    CASE WHEN obj.umuser = 0 THEN 'PUBLIC'
                         ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(obj.umuser)) END,
                    obj.srvname) END,
        (SELECT pg_catalog.string_agg(pg_catalog.format('DROP %I', d), ', ') FROM pg_catalog.unnest(drops) d));
      IF capped <> '{}' THEN
        RAISE WARNING 'dropped options % of %: above the caps for roles that are not superusers',
          pg_catalog.array_to_string(capped, ', '), what
          USING HINT = 'A superuser may set them again.';
      END IF;
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'could not drop options % of %: %',
        pg_catalog.array_to_string(drops, ', '), what, SQLERRM
        USING HINT = 'Drop or fix these options with ALTER.';
    END;
  END LOOP;
END
$$;
