--
-- Versions under attack: what a version (option version_of) must keep
-- whatever is thrown at it.  A role with USAGE on the server and CREATE on
-- a schema reaches nothing of a table it does not own; with edits carried
-- over the version's log is the old table's; without, the version holds
-- what the stream alone would have written (checked against a second
-- table fed only the stream's messages), also through segments, edits in
-- the creating transaction and SERIALIZABLE callers.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE ROLE regress_va_owner;
CREATE ROLE regress_va_reader;
CREATE ROLE regress_va_stranger;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
GRANT USAGE ON FOREIGN SERVER kafka TO regress_va_owner, regress_va_stranger;
CREATE SCHEMA va_priv AUTHORIZATION regress_va_owner;
CREATE SCHEMA va_pub;
GRANT USAGE, CREATE ON SCHEMA va_pub TO regress_va_owner, regress_va_stranger;
GRANT USAGE ON SCHEMA va_pub TO regress_va_reader;

-- an upsert source, and a table fed only the stream's messages
SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_priv.kv (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
CREATE FOREIGN TABLE va_priv.ref (k int, v text) SERVER kafka
  OPTIONS (topic 'ref', envelope 'upsert', key 'k');
RESET ROLE;
SET search_path = va_priv, public;
CREATE FUNCTION va_priv.stream(op text, rows kv[], off bigint) RETURNS void
LANGUAGE sql AS $$
  SELECT test_write('va_priv.kv', 'kafka', op, rows, 0, off);
  SELECT test_write('va_priv.ref', 'kafka', op, rows::text::va_priv.ref[], 0, off);
$$;

SELECT stream('upsert', ARRAY[ROW(1, 'a'), ROW(2, 'b'), ROW(3, 'c'), ROW(4, 'd'),
                              ROW(5, 'e'), ROW(6, 'f')]::kv[], 0);
UPDATE kv SET k = 10 WHERE k = 1;          -- a person changes a key
DELETE FROM kv WHERE k = 2;                -- deletes a key ...
INSERT INTO kv VALUES (2, 'typed');        -- ... and types it again
UPDATE kv SET v = 'x' WHERE k = 3;
SELECT stream('upsert', ARRAY[ROW(2, 'b2'), ROW(3, 'c2'), ROW(1, 'a2')]::kv[], 6);
-- the batches so far rolled up into segments, where every snapshot
-- sees them (whether one is older depends on the instance's other
-- sessions: what follows holds either way)
SET source_writes.segment_batches = 2;
SET source_writes.segment_delay = 0;
SELECT source_writes.compact('kv') >= 0 AS compacted;
RESET source_writes.segment_batches;
RESET source_writes.segment_delay;
TRUNCATE kv;                               -- a person empties it
SELECT stream('upsert', ARRAY[ROW(5, 'e2')]::kv[], 9);
INSERT INTO kv VALUES (6, 'f by hand');
SELECT stream('upsert', ARRAY[ROW(6, 'f2'), ROW(7, 'g')]::kv[], 10);
SELECT * FROM kv ORDER BY k;

SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_priv.kv_raw (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv', carry_edits 'false');
CREATE FOREIGN TABLE va_priv.kv_v2 (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'va_priv.kv');
RESET ROLE;

-- without edits: what the stream alone wrote
SELECT * FROM kv_raw ORDER BY k;
SELECT (SELECT array_agg(ROW(k, v) ORDER BY k) FROM kv_raw)
     = (SELECT array_agg(ROW(k, v) ORDER BY k) FROM ref) AS raw_is_the_stream;
-- no row retracted more often than added, at any time
SELECT count(*) AS negative FROM (
  SELECT sum(diff) OVER (PARTITION BY data::text ORDER BY ts, diff DESC) AS m
  FROM source_writes.updates(NULL::kv_raw)) u WHERE m < 0;
SELECT DISTINCT origin FROM source_writes.batches WHERE source = 'kv_raw'::regclass;

-- with edits: the same log
SELECT count(*) AS updates_differ FROM (
  (SELECT ts, diff, origin, data::text FROM source_writes.updates(NULL::kv)
   EXCEPT ALL
   SELECT ts, diff, origin, data::text FROM source_writes.updates(NULL::kv_v2))
  UNION ALL
  (SELECT ts, diff, origin, data::text FROM source_writes.updates(NULL::kv_v2)
   EXCEPT ALL
   SELECT ts, diff, origin, data::text FROM source_writes.updates(NULL::kv))) d;
SELECT count(*) AS history_differs FROM (
  (SELECT valid_from, valid_to, origin, role, retracted_origin, retracted_role,
          "partition", "offset", data::text FROM source_writes.history(NULL::kv)
   EXCEPT ALL
   SELECT valid_from, valid_to, origin, role, retracted_origin, retracted_role,
          "partition", "offset", data::text FROM source_writes.history(NULL::kv_v2))
  UNION ALL
  (SELECT valid_from, valid_to, origin, role, retracted_origin, retracted_role,
          "partition", "offset", data::text FROM source_writes.history(NULL::kv_v2)
   EXCEPT ALL
   SELECT valid_from, valid_to, origin, role, retracted_origin, retracted_role,
          "partition", "offset", data::text FROM source_writes.history(NULL::kv))) d;
SELECT source::text, part, next_offset FROM source_writes.progress
WHERE source IN ('kv'::regclass, 'kv_raw'::regclass, 'kv_v2'::regclass) ORDER BY 1, 2;

-- a version made in a transaction that already wrote to the old table
-- is refused: those writes have no timestamp yet, and the copy would
-- miss them; nothing is made, the writes roll back with it
BEGIN;
UPDATE kv SET v = 'in the same transaction' WHERE k = 5;
INSERT INTO kv VALUES (8, 'new in the same transaction');
SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_priv.kv_same (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv');
RESET ROLE;
SELECT * FROM kv_same ORDER BY k;
COMMIT;
SELECT * FROM kv ORDER BY k;
SELECT * FROM kv_same ORDER BY k;

-- a SERIALIZABLE caller whose snapshot is older than the old table
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM kv;
SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_priv.kv_ser (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv');
RESET ROLE;
SELECT (SELECT array_agg(ROW(k, v) ORDER BY k) FROM kv)
     = (SELECT array_agg(ROW(k, v) ORDER BY k) FROM kv_ser) AS ser_same;
COMMIT;

-- a stranger: USAGE on the server, CREATE on a schema, nothing else
RESET search_path;
SET ROLE regress_va_stranger;
CREATE FOREIGN TABLE va_pub.s (k int) SERVER kafka
  OPTIONS (topic 'kv', version_of 'va_priv.kv');
SET search_path = va_priv, va_pub;
CREATE FOREIGN TABLE va_pub.s (k int) SERVER kafka
  OPTIONS (topic 'kv', version_of 'kv');
CREATE FOREIGN TABLE va_pub.s (k int) SERVER kafka
  OPTIONS (topic 'kv', version_of 'pg_catalog.pg_authid');
CREATE FOREIGN TABLE va_pub.s (k int) SERVER kafka
  OPTIONS (topic 'kv', version_of 'source_writes.batches');
CREATE FOREIGN TABLE va_pub.s (k int) SERVER kafka
  OPTIONS (topic 'kv', version_of 'a.b.c.d');
RESET search_path;
RESET ROLE;

-- a version the stranger does not own, in a schema it can use
SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_pub.wide (id int, secret text, amount text) SERVER kafka
  OPTIONS (topic 'wide');
RESET ROLE;
SELECT test_write('va_pub.wide', 'kafka', 'append',
                  ARRAY[ROW(1, 's1', '1.5'), ROW(2, 's2', 'oops')]::va_pub.wide[], 0, 0);
INSERT INTO va_pub.wide VALUES (3, 's3', 'n/a');
SET ROLE regress_va_owner;
CREATE FOREIGN TABLE va_pub.wide_v2 (id int, secret text, amount numeric) SERVER kafka
  OPTIONS (topic 'wide', version_of 'va_pub.wide');
SELECT * FROM va_pub.wide_v2;
RESET ROLE;
SET ROLE regress_va_stranger;
CREATE FOREIGN TABLE va_pub.s (id int) SERVER kafka
  OPTIONS (topic 'wide', version_of 'va_pub.wide_v2');
-- uncarried_edits and errors: nothing to read, write or delete
SELECT count(*) FROM source_writes.uncarried_edits;
SELECT count(*) FROM source_writes.errors;
INSERT INTO source_writes.uncarried_edits
  VALUES ('va_pub.wide_v2', 'wide', 1, 'x', 'insert', '{}', 'x');
UPDATE source_writes.uncarried_edits SET reason = 'x';
DELETE FROM source_writes.uncarried_edits;
DELETE FROM source_writes.errors;
RESET ROLE;
-- a reader of the version reads what it reports
SET ROLE regress_va_owner;
GRANT SELECT ON va_pub.wide_v2 TO regress_va_reader;
RESET ROLE;
SET ROLE regress_va_reader;
SELECT edit, reason FROM source_writes.uncarried_edits;
DELETE FROM source_writes.uncarried_edits;
RESET ROLE;
SELECT count(*) FROM source_writes.uncarried_edits WHERE source = 'va_pub.wide_v2'::regclass;
SELECT count(*) FROM source_writes.errors WHERE source = 'va_pub.wide_v2'::regclass;

-- dropping the version drops what it reported, and its errors
DROP FOREIGN TABLE va_pub.wide_v2;
SELECT count(*) FROM source_writes.uncarried_edits;
SELECT count(*) FROM source_writes.errors;

DROP SCHEMA va_priv, va_pub CASCADE;
DROP SERVER kafka CASCADE;
DROP ROLE regress_va_owner, regress_va_reader, regress_va_stranger;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
