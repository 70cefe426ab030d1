--
-- Provenance: each row keeps where it came from (here, a Kafka message's
-- partition and offset).  blame() shows each current row with the batch
-- that wrote it, history() every version of every row, diff() the net
-- change between two readable times.  A person's UPDATE keeps the position
-- of the row it replaces (the row still comes from that message); a
-- person's INSERT has none.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE ROLE regress_prov_owner;
CREATE ROLE regress_prov_editor;
CREATE ROLE regress_prov_stranger;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
GRANT USAGE ON FOREIGN SERVER kafka TO regress_prov_owner;
CREATE SCHEMA p AUTHORIZATION regress_prov_owner;
GRANT USAGE ON SCHEMA p TO regress_prov_editor, regress_prov_stranger;
SET search_path = p, public;
SET ROLE regress_prov_owner;
CREATE FOREIGN TABLE p.events (id int, v text) SERVER kafka OPTIONS (topic 'events');
CREATE FOREIGN TABLE p.kv (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
GRANT SELECT, INSERT, UPDATE, DELETE ON p.events, p.kv TO regress_prov_editor;
RESET ROLE;

-- an error, with timestamps (13 digits) replaced
CREATE FUNCTION p.show_error(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  msg text; det text;
BEGIN
  EXECUTE query;
  RETURN 'no error';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
  RETURN regexp_replace(format(E'%s: %s\nDETAIL: %s', SQLSTATE, msg, det),
                        '[0-9]{13}', '<ts>', 'g');
END
$$;

-- timestamps as ranks among the batches of a table (NULL stays NULL)
CREATE FUNCTION p.tx(src regclass, ts bigint) RETURNS bigint LANGUAGE sql AS $$
  SELECT nullif(count(*), 0) FROM source_writes.batches b
  WHERE b.source = src AND b.ts <= tx.ts
$$;

-- a worker's batch of three messages of partition 0, from offset 100
SELECT test_write('events', 'kafka', 'append',
                  ARRAY[ROW(1, 'one'), ROW(2, 'two'), ROW(3, 'three')]::events[], 0, 100);
SELECT upper - 1 AS t1 FROM source_writes.frontiers('events') \gset

-- a person's edits: an update, an insert, a delete
SET ROLE regress_prov_editor;
BEGIN;
UPDATE events SET v = 'TWO' WHERE id = 2;
INSERT INTO events VALUES (4, 'typed');
DELETE FROM events WHERE id = 3;
-- this transaction's own rows: not stamped yet
SELECT ts IS NOT NULL AS stamped, origin, role, xid IS NOT NULL AS has_xid, "partition",
       "offset", data
FROM source_writes.blame(NULL::events) ORDER BY (data).id;
-- and history(): a version this transaction retracted has no valid_to yet
SELECT valid_from IS NOT NULL AS from_stamped, valid_to IS NOT NULL AS to_stamped,
       retracted_origin, data
FROM source_writes.history(NULL::events) ORDER BY (data).id, valid_from NULLS LAST;
COMMIT;
RESET ROLE;
SELECT upper - 1 AS t2 FROM source_writes.frontiers('events') \gset

-- another batch, of partition 1
SELECT test_write('events', 'kafka', 'append', ARRAY[ROW(5, 'five')]::events[], 1, 7);
SELECT upper - 1 AS t3 FROM source_writes.frontiers('events') \gset

-- each current row, the batch that wrote it, the message it came from
SELECT tx('events', ts), origin, role, xid IS NOT NULL AS has_xid, "partition", "offset",
       delivery, received_at, data
FROM source_writes.blame(NULL::events) ORDER BY (data).id;
-- a person's row was written in the transaction the log names
SELECT b.xid = bl.xid AS same_xid
FROM source_writes.blame(NULL::events) bl
JOIN source_writes.batches b ON b.source = 'events'::regclass AND b.ts = bl.ts
WHERE (bl.data).id = 4;

-- every version: when it was current, who wrote and retracted it
SELECT tx('events', valid_from) AS v_from, tx('events', valid_to) AS v_to, origin, role,
       retracted_origin, retracted_role, "partition", "offset", data
FROM source_writes.history(NULL::events) ORDER BY valid_from, (data).id, valid_to NULLS LAST;
-- the versions of one row: filter as any query
SELECT tx('events', valid_from), tx('events', valid_to), data
FROM source_writes.history(NULL::events) WHERE (data).id = 2 ORDER BY valid_from;

-- the net change between readable times
SELECT tx('events', ts), change, origin, role, data
FROM source_writes.diff(NULL::events, :t1, :t2) ORDER BY ts, change DESC, (data).id;
SELECT tx('events', ts), change, origin, role, data
FROM source_writes.diff(NULL::events, :t2, :t3) ORDER BY ts, change DESC, (data).id;
SELECT tx('events', ts), change, data
FROM source_writes.diff(NULL::events, :t1, :t3) ORDER BY ts, change DESC, (data).id;
-- a row added and removed in between is no change; nor is an empty range
SELECT count(*) FROM source_writes.diff(NULL::events, :t3, :t3);
SET ROLE regress_prov_editor;
INSERT INTO events VALUES (6, 'brief');
DELETE FROM events WHERE id = 6;
RESET ROLE;
SELECT upper - 1 AS t4 FROM source_writes.frontiers('events') \gset
SELECT count(*) FROM source_writes.diff(NULL::events, :t3, :t4);
-- the same as the contents at the two times compared
SET source_writes.as_of = :t1;
CREATE TEMP TABLE at_t1 AS SELECT e::text AS data FROM events e;
SET source_writes.as_of = :t4;
CREATE TEMP TABLE at_t4 AS SELECT e::text AS data FROM events e;
RESET source_writes.as_of;
SELECT change, data FROM source_writes.diff(NULL::events, :t1, :t4) ORDER BY 1, 2;
(SELECT 'added' AS change, data FROM (TABLE at_t4 EXCEPT ALL TABLE at_t1) a
 UNION ALL
 SELECT 'removed', data FROM (TABLE at_t1 EXCEPT ALL TABLE at_t4) r)
EXCEPT ALL
SELECT change, data::text FROM source_writes.diff(NULL::events, :t1, :t4);

-- the times must be readable, in order
SELECT show_error(format('SELECT * FROM source_writes.diff(NULL::events, %s, %s)', :t2, :t1));
SELECT show_error(format('SELECT * FROM source_writes.diff(NULL::events, %s, %s)', :t1, :t4 + 1));
SELECT show_error(format('SELECT * FROM source_writes.diff(NULL::events, %s, %s)', :t1 - 100000, :t1));
SELECT * FROM source_writes.diff(NULL::events, NULL, :t1);

-- an upsert source: a message replaces a person's edit; the row says so
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a'), ROW(2, 'b')]::kv[], 3, 40);
SET ROLE regress_prov_editor;
UPDATE kv SET v = 'fixed' WHERE k = 1;
RESET ROLE;
SELECT origin, role, "partition", "offset", data FROM source_writes.blame(NULL::kv) ORDER BY (data).k;
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a2')]::kv[], 3, 42);
SELECT origin, role, "partition", "offset", data FROM source_writes.blame(NULL::kv) ORDER BY (data).k;
SELECT origin, retracted_origin, retracted_role, "partition", "offset", data
FROM source_writes.history(NULL::kv) WHERE (data).k = 1 ORDER BY valid_from;

-- who may read the table may read where its rows came from; others not
SET ROLE regress_prov_stranger;
SELECT * FROM source_writes.blame(NULL::events);
SELECT * FROM source_writes.history(NULL::events);
SELECT * FROM source_writes.diff(NULL::events, :t1, :t2);
-- before its arguments are looked at
SELECT * FROM source_writes.diff(NULL::events, :t2, :t1);
SELECT * FROM source_writes.diff(NULL::events, NULL, NULL);
RESET ROLE;
-- they return whole rows: SELECT on some columns is not enough, on each
-- column is, as for a whole-row reference in a query
CREATE ROLE regress_prov_columns;
GRANT USAGE ON SCHEMA p TO regress_prov_columns;
GRANT SELECT (id) ON p.events TO regress_prov_columns;
SET ROLE regress_prov_columns;
SELECT count(e) FROM events e;
SELECT count(*) FROM source_writes.blame(NULL::events);
SELECT count(*) FROM source_writes.updates(NULL::events);
SELECT since <= upper FROM source_writes.frontiers('events');
SELECT source_writes.channel('events') IS NOT NULL;
RESET ROLE;
GRANT SELECT (v) ON p.events TO regress_prov_columns;
SET ROLE regress_prov_columns;
SELECT count(e) FROM events e;
SELECT count(*) FROM source_writes.blame(NULL::events);
SELECT count(*) FROM source_writes.history(NULL::events);
SELECT count(*) FROM source_writes.diff(NULL::events, :t1, :t2);
SELECT count(*) FROM source_writes.updates(NULL::events);
SELECT since <= upper FROM source_writes.frontiers('events');
SELECT source_writes.channel('events') IS NOT NULL;
RESET ROLE;
SELECT * FROM source_writes.blame(NULL::int);
SELECT * FROM source_writes.history(NULL::pg_class);

DROP SCHEMA p CASCADE;
DROP SERVER kafka;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
DROP ROLE regress_prov_owner, regress_prov_editor, regress_prov_stranger, regress_prov_columns;
