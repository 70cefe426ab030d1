--
-- Versions: CREATE FOREIGN TABLE ... OPTIONS (version_of 'old') makes a
-- table that starts with the old one's log (its batches' timestamps,
-- origins and roles, its rows mapped to the new columns by name), its
-- offsets and its kept keys, and goes on from there beside it.  With
-- carry_edits 'false' the people's edits stay behind.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE ROLE regress_ver_owner;
CREATE ROLE regress_ver_editor;
CREATE ROLE regress_ver_stranger;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
GRANT USAGE ON FOREIGN SERVER kafka, hooks TO regress_ver_owner, regress_ver_stranger;
CREATE SCHEMA ver AUTHORIZATION regress_ver_owner;
GRANT USAGE, CREATE ON SCHEMA ver TO regress_ver_editor, regress_ver_stranger;
SET search_path = ver, public;
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.orders (id int, item text, amount text) SERVER kafka
  OPTIONS (topic 'orders');
CREATE FOREIGN TABLE ver.kv (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
GRANT SELECT, INSERT, UPDATE, DELETE ON ver.orders, ver.kv TO regress_ver_editor;
RESET ROLE;

-- timestamps as ranks among the batches of a table (NULL stays NULL)
CREATE FUNCTION ver.tx(src regclass, ts bigint) RETURNS bigint LANGUAGE sql AS $$
  SELECT nullif(count(*), 0) FROM source_writes.batches b
  WHERE b.source = src AND b.ts <= tx.ts
$$;

-- the stream, and people's corrections
SELECT test_write('orders', 'kafka', 'append',
                  ARRAY[ROW(1, 'pen', '1.50'), ROW(2, 'ink', '4'), ROW(3, 'pad', '2.25'),
                        ROW(7, 'mug', 'oops')]::orders[],
                  0, 100);
SET ROLE regress_ver_editor;
UPDATE orders SET amount = '4.00' WHERE id = 2;
UPDATE orders SET amount = '5' WHERE id = 7;
INSERT INTO orders VALUES (4, 'box', 'n/a');
DELETE FROM orders WHERE id = 3;
RESET ROLE;
SELECT test_write('orders', 'kafka', 'append', ARRAY[ROW(5, 'cap', '0.75')]::orders[], 1, 7);
SET ROLE regress_ver_editor;
UPDATE orders SET item = 'crate' WHERE id = 4;
RESET ROLE;
SELECT * FROM orders ORDER BY id;

-- a new version: amount becomes numeric, a new column gets its default;
-- the row a person typed 'n/a' into cannot be numeric: that edit, and the
-- one after it on the same row, are reported, not carried; the message
-- whose amount was 'oops', which a person fixed, is a past version that
-- numeric cannot hold: it is left out of the history (the person's delete
-- of it is reported), and the fix is carried
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.orders_v2 (id int, item text, amount numeric(8,2),
                                    currency text DEFAULT 'EUR')
  SERVER kafka OPTIONS (topic 'orders', version_of 'orders');
SELECT * FROM orders_v2 ORDER BY id;
RESET ROLE;
-- the same log: each batch's time, origin and role; each row's message
SELECT tx('orders_v2', ts), origin, role, "partition", "offset", data
FROM source_writes.blame(NULL::orders_v2) ORDER BY (data).id;
SELECT tx('orders_v2', valid_from) AS v_from, tx('orders_v2', valid_to) AS v_to, origin,
       retracted_origin, "partition", "offset", data
FROM source_writes.history(NULL::orders_v2) ORDER BY valid_from, (data).id;
-- ... in the same transactions
SELECT count(*), bool_and(b1.xid = b2.xid) AS same_xids
FROM source_writes.blame(NULL::orders) b1
JOIN source_writes.blame(NULL::orders_v2) b2 ON (b1.data).id = (b2.data).id AND b1.ts = b2.ts;
SELECT (SELECT array_agg(ts ORDER BY ts) FROM source_writes.batches WHERE source = 'orders'::regclass)
     = (SELECT array_agg(ts ORDER BY ts) FROM source_writes.batches WHERE source = 'orders_v2'::regclass)
  AS same_batch_times;
SELECT (SELECT array_agg(ROW(origin, role) ORDER BY ts) FROM source_writes.batches
        WHERE source = 'orders'::regclass)
     = (SELECT array_agg(ROW(origin, role) ORDER BY ts) FROM source_writes.batches
        WHERE source = 'orders_v2'::regclass) AS same_origins;
SELECT count(*) AS batch_ids_shared FROM source_writes.batches b1
JOIN source_writes.batches b2 USING (batch)
WHERE b1.source = 'orders'::regclass AND b2.source = 'orders_v2'::regclass;
SELECT f1.since = f2.since AS same_since, f1.upper = f2.upper AS same_upper
FROM source_writes.frontiers('orders') f1, source_writes.frontiers('orders_v2') f2;
-- it goes on from the old table's offsets
SELECT source, part, next_offset, topic FROM source_writes.progress
WHERE source IN ('orders'::regclass, 'orders_v2'::regclass) ORDER BY 1, 2;
SELECT version_of, tx('orders', ts), role, edit, "row", reason
FROM source_writes.uncarried_edits WHERE source = 'orders_v2'::regclass ORDER BY ts, edit;
SELECT "partition", "offset", key, value, error FROM source_writes.errors
WHERE source = 'orders_v2'::regclass;
-- the option stays, as given
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'orders_v2'::regclass;

-- both go on: the stream writes each
SELECT test_write('orders', 'kafka', 'append', ARRAY[ROW(6, 'ruler', '3')]::orders[], 0, 104);
SELECT test_write('orders_v2', 'kafka', 'append', ARRAY[ROW(6, 'ruler', 3, 'EUR')]::orders_v2[], 0, 104);
SELECT count(*) FROM orders;
SELECT count(*) FROM orders_v2;
SELECT source, part, next_offset FROM source_writes.progress
WHERE source IN ('orders'::regclass, 'orders_v2'::regclass) ORDER BY 1, 2;

-- without edits: what the stream says (the deleted row is back, the
-- updated one as it came, the inserted one not there)
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.orders_raw (id int, item text, amount text) SERVER kafka
  OPTIONS (topic 'orders', version_of 'orders', carry_edits 'false');
SELECT * FROM orders_raw ORDER BY id;
RESET ROLE;
SELECT DISTINCT origin FROM source_writes.blame(NULL::orders_raw);
SELECT DISTINCT origin FROM source_writes.batches WHERE source = 'orders_raw'::regclass;
SELECT count(*) FROM source_writes.uncarried_edits WHERE source = 'orders_raw'::regclass;

-- an upsert source without edits: a row a person changed is replaced by
-- the stream's next message of its key, as if nobody had edited it
RESET ROLE;
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a'), ROW(2, 'b'), ROW(3, 'c')]::kv[], 0, 0);
SET ROLE regress_ver_editor;
UPDATE kv SET v = 'A by hand' WHERE k = 1;
DELETE FROM kv WHERE k = 2;
UPDATE kv SET k = 30 WHERE k = 3;
RESET ROLE;
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a2'), ROW(4, 'd')]::kv[], 0, 3);
SELECT test_write('kv', 'kafka', 'tombstone', ARRAY[ROW(30, NULL)]::kv[], 0, 5);
SELECT * FROM kv ORDER BY k;
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.kv_raw (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv', carry_edits 'false');
CREATE FOREIGN TABLE ver.kv_v2 (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv');
RESET ROLE;
SELECT * FROM kv_raw ORDER BY k;
SELECT * FROM kv_v2 ORDER BY k;
-- key 1's first version lasts until the stream's next message of key 1
SELECT tx('kv_raw', valid_from) AS v_from, tx('kv_raw', valid_to) AS v_to, origin,
       retracted_origin, data
FROM source_writes.history(NULL::kv_raw) ORDER BY (data).k, valid_from;
-- every key once, and no row retracted twice
SELECT k, count(*) FROM kv_raw GROUP BY k HAVING count(*) > 1;
SELECT (SELECT array_agg(ROW(k, v) ORDER BY k) FROM kv)
     = (SELECT array_agg(ROW(k, v) ORDER BY k) FROM kv_v2) AS kv_v2_same;

-- swapping names is a transaction of renames
SET ROLE regress_ver_owner;
BEGIN;
ALTER FOREIGN TABLE orders RENAME TO orders_v1;
ALTER FOREIGN TABLE orders_v2 RENAME TO orders;
COMMIT;
SELECT count(*) FROM orders;
SELECT count(*) FROM orders_v1;
SELECT id, amount, currency FROM orders WHERE id = 2;

-- the options act once, as the table is created
ALTER FOREIGN TABLE orders OPTIONS (SET version_of 'kv');
ALTER FOREIGN TABLE orders_raw OPTIONS (ADD retain_history '1 day', SET carry_edits 'true');
ALTER FOREIGN TABLE orders OPTIONS (DROP version_of);
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'orders'::regclass;
ALTER FOREIGN TABLE kv_v2 OPTIONS (DROP version_of);
ALTER FOREIGN TABLE kv_raw OPTIONS (DROP version_of, DROP carry_edits);

-- what is refused, with nothing made
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', carry_edits 'false');
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'orders', carry_edits 'maybe');
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'nothing');
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'bad');
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'other', version_of 'orders');
CREATE FOREIGN TABLE ver.bad (id int) SERVER hooks OPTIONS (version_of 'orders');
CREATE TABLE ver.plain (id int);
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'plain');
-- a column whose type the old one does not cast to
CREATE FOREIGN TABLE ver.bad (id point, item text) SERVER kafka
  OPTIONS (topic 'orders', version_of 'orders_v1');
SELECT count(*) FROM pg_class WHERE relname = 'bad';
-- values of the stream that the new type does not take: kept as errors
CREATE FOREIGN TABLE ver.items (id int, item int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'orders_v1');
SELECT count(*) FROM items;
SELECT "partition", "offset", error FROM source_writes.errors
WHERE source = 'items'::regclass ORDER BY 1, 2 LIMIT 2;
-- only the old table's owner may make a version of it (it reads every
-- role's edits, and its offsets)
RESET ROLE;
SET ROLE regress_ver_stranger;
CREATE FOREIGN TABLE ver.bad (id int) SERVER kafka
  OPTIONS (topic 'orders', version_of 'orders_v1');
-- nor read what was not carried
SELECT count(*) FROM source_writes.uncarried_edits;
RESET ROLE;
SELECT count(*) FROM source_writes.uncarried_edits;

-- dropping the new version drops what it reported
DROP FOREIGN TABLE orders;
SELECT count(*) FROM source_writes.uncarried_edits;
SELECT count(*) FROM source_writes.progress WHERE source::text LIKE '%orders%';

-- columns of the new table: a generated one is computed from the new row
-- (also one the old table has, by another expression); a shorter varchar
-- refuses a longer value, as INSERT does (the row is left behind); a new
-- column of a domain that takes no NULL and has no default refuses the
-- version, as ALTER TABLE ... ADD COLUMN does
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.g (id int, name varchar(10), twice int GENERATED ALWAYS AS (id * 2) STORED)
  SERVER hooks;
INSERT INTO g (id, name) VALUES (1, 'abc'), (2, 'abcdefghij');
CREATE FOREIGN TABLE ver.g2 (id int, name varchar(3),
                             twice int GENERATED ALWAYS AS (id * 3) STORED,
                             plus int GENERATED ALWAYS AS (id + 100) STORED)
  SERVER hooks OPTIONS (version_of 'g');
SELECT * FROM g2 ORDER BY id;
SELECT edit, "row", reason FROM source_writes.uncarried_edits WHERE source = 'g2'::regclass;
CREATE DOMAIN ver.nn AS int NOT NULL;
CREATE FOREIGN TABLE ver.g3 (id int, d nn) SERVER hooks OPTIONS (version_of 'g');
CREATE FOREIGN TABLE ver.g3 (id int, d nn DEFAULT 0) SERVER hooks OPTIONS (version_of 'g');
SELECT * FROM g3 ORDER BY id;
-- what a report shows of an old row is what the new version has: a
-- column it leaves out stays out
CREATE FOREIGN TABLE ver.g4 (id int, name int) SERVER hooks OPTIONS (version_of 'g');
SELECT "row" FROM source_writes.uncarried_edits WHERE source = 'g4'::regclass ORDER BY ts;
-- a version keeps the envelope and key
CREATE FOREIGN TABLE ver.kv_other (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', version_of 'kv');
CREATE FOREIGN TABLE ver.kv_other (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'v', version_of 'kv');
RESET ROLE;

-- without edits, rows before since: a stream row a person changed after
-- its batch was folded is replaced by the stream's next write of its key;
-- a person's row before since stays behind
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.fk (k int, v text) SERVER kafka
  OPTIONS (topic 'fk', envelope 'upsert', key 'k', retain_history '0');
RESET ROLE;
SELECT test_write('fk', 'kafka', 'upsert', ARRAY[ROW(1, 'a')]::fk[], 0, 0);
INSERT INTO fk VALUES (5, 'typed early');
SELECT test_write('fk', 'kafka', 'upsert', ARRAY[ROW(9, 'z')]::fk[], 0, 1);
SELECT source_writes.compact('fk') >= 0 AS compacted;
SELECT since > 0 AS folded FROM source_writes.frontiers('fk');
ALTER FOREIGN TABLE fk OPTIONS (DROP retain_history);
UPDATE fk SET v = 'A' WHERE k = 1;
SELECT test_write('fk', 'kafka', 'upsert', ARRAY[ROW(1, 'b')]::fk[], 0, 2);
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.fk_raw (k int, v text) SERVER kafka
  OPTIONS (topic 'fk', envelope 'upsert', key 'k', version_of 'fk', carry_edits 'false');
RESET ROLE;
SELECT * FROM fk_raw ORDER BY k;

-- a source that keeps its messages (retain_raw): a version decodes its
-- new columns from them, by its own options (the others come from the
-- rows, a person's changes too); a message it cannot decode is kept as
-- its error, message and all (the messages come here through
-- retry_errors(), as a worker's would)
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.ev (id int, amount text) SERVER kafka
  OPTIONS (topic 'ev', retain_raw 'true');
RESET ROLE;
INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error, "timestamp")
VALUES ('ev', 0, 0, 10, 'k1', '{"id": 1, "amount": "1.5", "note": "first"}', 'kept', 1767261600000),
       ('ev', 0, 0, 11, 'k2', '{"id": 2, "amount": "oops", "note": "second"}', 'kept', 1767261600001),
       ('ev', 0, 0, 12, NULL, '{"id": 3, "amount": "7", "note": "third"}', 'kept', 1767261600002),
       ('ev', 0, 0, 13, NULL, '{"id": 4, "amount": "bad", "note": "fourth"}', 'kept', 1767261600003);
SELECT source_writes.retry_errors('ev');
GRANT SELECT, UPDATE ON ver.ev TO regress_ver_editor;
SET ROLE regress_ver_editor;
UPDATE ev SET amount = '3.25' WHERE id = 3;
UPDATE ev SET amount = '4' WHERE id = 4;
RESET ROLE;
SET ROLE regress_ver_owner;
CREATE FOREIGN TABLE ver.ev_v2 (id int, amount numeric, note text DEFAULT 'none')
  SERVER kafka OPTIONS (topic 'ev', version_of 'ev', retain_raw 'true');
RESET ROLE;
-- note comes from the messages, not the default: also for the rows a
-- person changed (which keep none), from the message of the row each
-- replaced, in the history; but a message the new options cannot decode
-- gives the default (the person's fix of 4 stays)
SELECT * FROM ev_v2 ORDER BY id;
SELECT "partition", "offset", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value,
       "timestamp", error
FROM source_writes.errors WHERE source = 'ev_v2'::regclass;
-- the version keeps the messages too, as they came
SELECT (SELECT array_agg(ROW(r."partition", r."offset", r.key, r.value, r."timestamp")
                         ORDER BY r."offset")
        FROM source_writes.raw_messages(NULL::ev) r
        WHERE r."offset" <> 11 AND NOT (r."offset" = 13 AND r.valid_to IS NOT NULL))
     = (SELECT array_agg(ROW(r."partition", r."offset", r.key, r.value, r."timestamp")
                         ORDER BY r."offset")
        FROM source_writes.raw_messages(NULL::ev_v2) r) AS same_messages;
-- once its column takes the value, retry_errors() brings the message in
ALTER FOREIGN TABLE ev_v2 ALTER COLUMN amount TYPE text;
SELECT source_writes.retry_errors('ev_v2');
SELECT * FROM ev_v2 ORDER BY id;

RESET search_path;
DROP SCHEMA ver CASCADE;
DROP SERVER kafka, hooks CASCADE;
DROP ROLE regress_ver_owner, regress_ver_editor, regress_ver_stranger;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
