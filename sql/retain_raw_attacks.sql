--
-- retain_raw under attack (an outside review): what rows must keep
-- whatever is done to the table.  Our columns in two runs (the option
-- turned on after a column was added) through ADD and DROP COLUMN, users'
-- indexes, a type rewrite, as_of, updates(), history(), TRUNCATE,
-- compaction, export()/import() and a version that decodes a new column
-- from the kept messages; messages big enough for TOAST, byte for byte
-- through edits, a filled column, a rewrite, VACUUM and a version, with
-- amcheck on the heaps; no null bitmap in Kafka heaps that never had the
-- option; Debezium events decoded again; who reads the messages.  Messages
-- come in through retry_errors(), as in sql/retain_raw.sql.
--
CREATE EXTENSION pageinspect;
CREATE EXTENSION amcheck;

CREATE ROLE regress_rra_owner;
CREATE ROLE regress_rra_reader;
CREATE ROLE regress_rra_stranger;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
GRANT USAGE ON FOREIGN SERVER kafka TO regress_rra_owner;
CREATE SCHEMA rra AUTHORIZATION regress_rra_owner;
GRANT USAGE ON SCHEMA rra TO regress_rra_reader, regress_rra_stranger;
SET search_path = rra, public;

-- our columns of a source's heaps, and where they are
CREATE FUNCTION rra.hidden(t regclass) RETURNS TABLE (heap text, columns text)
LANGUAGE sql AS $$
  SELECT h.heap, string_agg(a.attname, ',' ORDER BY a.attnum)
  FROM source_writes.source_tables s,
       LATERAL (VALUES ('current', s.current_rel), ('history', s.history_rel)) h(heap, rel)
  JOIN pg_attribute a ON a.attrelid = h.rel AND a.attnum > 0 AND NOT a.attisdropped
  WHERE s.relid = t
  GROUP BY h.heap ORDER BY h.heap
$$;

-- a kept error of a Kafka source, which retry_errors() ingests
CREATE FUNCTION rra.keep(t regclass, off bigint, key bytea, value bytea, ts bigint,
                         names text[] DEFAULT NULL, hvalues bytea[] DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error,
                                    "timestamp", header_names, header_values)
  VALUES (t, 0, 0, off, key, value, 'kept by the test', ts, names, hvalues)
$$;

-- text of n random-looking hex digits, the same for the same seed
CREATE FUNCTION rra.noise(n int, seed int) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(md5((seed * 100000 + g)::text), '') FROM generate_series(1, n / 32) g
$$;

--
-- 1. Two runs of our columns: the option turned on after a column was
-- added, then a column added after it and one dropped
--
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE t (id int, v text, gone text) SERVER kafka OPTIONS (topic 't');
RESET ROLE;
SELECT keep('t', 0, '\x01', convert_to('{"id": 1, "v": "one", "gone": "g1"}', 'UTF8'), 1);
SELECT source_writes.retry_errors('t') AS moved;
SET ROLE regress_rra_owner;
ALTER FOREIGN TABLE t ADD COLUMN a int DEFAULT 5;
ALTER FOREIGN TABLE t OPTIONS (ADD retain_raw 'true');
ALTER FOREIGN TABLE t ADD COLUMN b text DEFAULT 'bee', DROP COLUMN gone;
CREATE INDEX t_b ON t (b);
CREATE INDEX t_a ON t (a) WHERE a > 1;
RESET ROLE;
SELECT * FROM hidden('t');
SELECT keep('t', 1, '\x02', convert_to('{"id": 2, "v": "two", "a": 20, "b": "bb"}', 'UTF8'), 2,
            ARRAY['h'], ARRAY['\x68'::bytea]);
SELECT source_writes.retry_errors('t') AS moved;
SELECT * FROM t ORDER BY id;
-- a rewrite of two columns, one on each side of the raw message's run
ALTER FOREIGN TABLE t ALTER COLUMN a TYPE bigint, ALTER COLUMN b TYPE varchar(10);
SELECT * FROM hidden('t');
SELECT * FROM t ORDER BY id;
-- the users' indexes still find the rows, by the right columns
SET enable_seqscan = off;
SELECT id, a, b FROM t WHERE b = 'bb';
SELECT id, a FROM t WHERE a = 20;
RESET enable_seqscan;
UPDATE t SET b = 'BB' WHERE id = 2;
SELECT "offset", key, convert_from(value, 'UTF8') AS value, "timestamp", header_names,
       header_values, valid_to IS NULL AS current, data
FROM source_writes.raw_messages(NULL::t) ORDER BY valid_from, (data).id;
SELECT diff, data FROM source_writes.updates(NULL::t) ORDER BY ts, diff, data::text;
SELECT (data).*, valid_to IS NULL AS current
FROM source_writes.history(NULL::t) ORDER BY valid_from, (data).id;
SELECT upper - 1 AS last FROM source_writes.frontiers('t') \gset
SET source_writes.as_of = :'last';
SELECT * FROM t ORDER BY id;
RESET source_writes.as_of;
-- a version decodes its new column from the kept message (the row that
-- keeps none gets NULL), and keeps the messages
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE t_v2 (id int, v text, a bigint, b varchar(10), gone text) SERVER kafka
  OPTIONS (topic 't', version_of 't', retain_raw 'true');
RESET ROLE;
SELECT * FROM t_v2 ORDER BY id;
SELECT "offset", convert_from(value, 'UTF8') AS value, data
FROM source_writes.raw_messages(NULL::t_v2) ORDER BY valid_from, (data).id;
-- export() and import(): the same log, and the same messages
CREATE TABLE rra.lines AS SELECT * FROM source_writes.export('t');
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE t_moved (id int, v text, a bigint, b varchar(10)) SERVER kafka
  OPTIONS (topic 't_moved', retain_raw 'true');
RESET ROLE;
SELECT source_writes.import('t_moved', 'rra.lines') AS imported;
SELECT (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::t))
     = (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::t_moved)) AS same_log,
       (SELECT count(*) FROM source_writes.raw_messages(NULL::t_moved)) AS moved_messages,
       (SELECT string_agg(concat_ws(' ', valid_from, valid_to, "partition", "offset",
                                    encode(key, 'hex'), encode(value, 'hex'), "timestamp",
                                    header_names, header_values, data), ','
                          ORDER BY valid_from, data::text)
        FROM source_writes.raw_messages(NULL::t))
     = (SELECT string_agg(concat_ws(' ', valid_from, valid_to, "partition", "offset",
                                    encode(key, 'hex'), encode(value, 'hex'), "timestamp",
                                    header_names, header_values, data), ','
                          ORDER BY valid_from, data::text)
        FROM source_writes.raw_messages(NULL::t_moved)) AS same_messages;
-- TRUNCATE retracts every row with its message; compaction deletes them
TRUNCATE t;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to IS NULL) AS current
FROM source_writes.raw_messages(NULL::t);
ALTER FOREIGN TABLE t OPTIONS (ADD retain_history '0');
SELECT source_writes.compact('t') AS deleted;
SELECT count(*) AS versions FROM source_writes.raw_messages(NULL::t);

--
-- 2. Messages big enough for TOAST: byte for byte through an UPDATE, a
-- DELETE, a column filled by ADD COLUMN, a type rewrite, VACUUM FREEZE and
-- a version; amcheck finds the heaps and their TOAST clean
--
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE big (id int, v text) SERVER kafka OPTIONS (topic 'big', retain_raw 'true');
RESET ROLE;
SELECT count(*) AS kept FROM (
  SELECT keep('big', g, convert_to(noise(3200, g), 'UTF8'),
              convert_to(format('{"id": %s, "v": "v%s", "junk": "%s"}', g, g, noise(96000, g)), 'UTF8'),
              g, ARRAY['h'], ARRAY[convert_to(noise(6400, -g), 'UTF8')])
  FROM generate_series(1, 12) g) k;
SELECT source_writes.retry_errors('big') AS moved;
CREATE TABLE rra.sums AS
  SELECT (data).id, md5(value) AS value, md5(key) AS key, md5(header_values[1]) AS header
  FROM source_writes.raw_messages(NULL::big);
SELECT count(*), min(length(value)) > 96000 AS big FROM source_writes.raw_messages(NULL::big);
SELECT s.current_rel::regclass AS big_current, s.history_rel::regclass AS big_history
FROM source_writes.source_tables s WHERE relid = 'big'::regclass \gset
-- out of line, not in the heap's pages
SELECT max(lp_len) < 2100 AS out_of_line FROM heap_page_items(get_raw_page(:'big_current', 0));
UPDATE big SET v = v || '!' WHERE id <= 6;
DELETE FROM big WHERE id IN (1, 7);
ALTER FOREIGN TABLE big ADD COLUMN n int DEFAULT 1;
ALTER FOREIGN TABLE big ALTER COLUMN id TYPE bigint;
VACUUM (FREEZE) :big_current;
VACUUM (FREEZE) :big_history;
SELECT count(*) AS versions,
       count(*) FILTER (WHERE md5(r.value) <> s.value OR md5(r.key) <> s.key
                        OR md5(r.header_values[1]) <> s.header) AS changed
FROM source_writes.raw_messages(NULL::big) r JOIN sums s ON s.id = (r.data).id;
SELECT count(*) AS problems FROM verify_heapam(:'big_current', check_toast => true);
SELECT count(*) AS problems FROM verify_heapam(:'big_history', check_toast => true);
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE big_v2 (id bigint, v text, n int, junk text) SERVER kafka
  OPTIONS (topic 'big', version_of 'big', retain_raw 'true');
RESET ROLE;
SELECT count(*) AS rows, count(*) FILTER (WHERE junk = noise(96000, id::int)) AS junk_decoded
FROM big_v2;
SELECT count(*) AS versions,
       count(*) FILTER (WHERE md5(r.value) <> s.value OR md5(r.key) <> s.key
                        OR md5(r.header_values[1]) <> s.header) AS changed
FROM source_writes.raw_messages(NULL::big_v2) r JOIN sums s ON s.id = (r.data).id;

--
-- 3. A Kafka heap that never had the option keeps no null bitmap (nine
-- columns: a bitmap would make the header 8 bytes longer); rows written
-- while it was on, or after it was turned off, may have one
--
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE nb (a int, b int, c int, d int, e int, f int, g int, h int, i int)
  SERVER kafka OPTIONS (topic 'nb');
RESET ROLE;
SELECT keep('nb', 0, '\x01', convert_to('{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}', 'UTF8'), 5);
SELECT source_writes.retry_errors('nb') AS moved;
SELECT s.current_rel::regclass AS nb_current FROM source_writes.source_tables s
WHERE relid = 'nb'::regclass \gset
SELECT lp, t_infomask & 1 AS has_null, t_hoff FROM heap_page_items(get_raw_page(:'nb_current', 0));
ALTER FOREIGN TABLE nb OPTIONS (ADD retain_raw 'true');
SELECT keep('nb', 1, NULL, convert_to('{"a":2,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}', 'UTF8'), 5);
SELECT source_writes.retry_errors('nb') AS moved;
SELECT lp, t_infomask & 1 AS has_null, t_hoff FROM heap_page_items(get_raw_page(:'nb_current', 0));

--
-- 4. Debezium: a row keeps the event it came from (the whole envelope, in
-- payload or not); a tombstone's event is kept by no row; a version
-- decodes its new column from the after image again
--
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE dbz (id int, v text) SERVER kafka
  OPTIONS (topic 'dbz', envelope 'debezium', key 'id', retain_raw 'true');
RESET ROLE;
SELECT keep('dbz', 0, convert_to('{"id": 1}', 'UTF8'),
            convert_to('{"op":"c","before":null,"after":{"id":1,"v":"a","extra":"x1"},"source":{},"ts_ms":1}', 'UTF8'), 10);
SELECT keep('dbz', 1, convert_to('{"id": 2}', 'UTF8'),
            convert_to('{"payload":{"op":"r","before":null,"after":{"id":2,"v":"b","extra":"x2"},"source":{},"ts_ms":1}}', 'UTF8'), 11);
SELECT source_writes.retry_errors('dbz') AS moved;
SELECT keep('dbz', 2, convert_to('{"id": 1}', 'UTF8'),
            convert_to('{"op":"u","before":{"id":1,"v":"a"},"after":{"id":1,"v":"a2","extra":"x1b"},"source":{},"ts_ms":2}', 'UTF8'), 12);
SELECT keep('dbz', 3, convert_to('{"id": 2}', 'UTF8'),
            convert_to('{"op":"d","before":{"id":2,"v":"b"},"after":null,"source":{},"ts_ms":3}', 'UTF8'), 13);
SELECT source_writes.retry_errors('dbz') AS moved;
SELECT * FROM dbz;
SELECT "offset", convert_from(value, 'UTF8') AS value, valid_to IS NULL AS current, data
FROM source_writes.raw_messages(NULL::dbz) ORDER BY "offset";
SET ROLE regress_rra_owner;
CREATE FOREIGN TABLE dbz_v2 (id int, v text, extra text) SERVER kafka
  OPTIONS (topic 'dbz', envelope 'debezium', key 'id', version_of 'dbz');
RESET ROLE;
SELECT * FROM dbz_v2;
SELECT (data).*, valid_to IS NULL AS current
FROM source_writes.history(NULL::dbz_v2) ORDER BY valid_from;

--
-- 5. People's rows keep none (INSERT, COPY); who reads the messages
--
INSERT INTO dbz VALUES (3, 'typed');
COPY dbz FROM stdin;
4	copied
\.
SELECT count(*) FILTER (WHERE (data).id IN (3, 4)) AS people_rows
FROM source_writes.raw_messages(NULL::dbz);
-- a row ingested before the option was turned on has none to show
SELECT (data).a FROM source_writes.raw_messages(NULL::nb);
GRANT SELECT ON dbz TO regress_rra_reader;
GRANT SELECT (id) ON dbz TO regress_rra_stranger;
SET ROLE regress_rra_reader;
SELECT count(*) AS read FROM source_writes.raw_messages(NULL::dbz);
SET ROLE regress_rra_stranger;
SELECT count(*) FROM source_writes.raw_messages(NULL::dbz);
SELECT count(*) FROM source_writes.raw_messages(NULL::big);
RESET ROLE;
-- a view's row type is not a source table's
CREATE VIEW rra.dbz_view AS SELECT * FROM dbz;
SELECT count(*) FROM source_writes.raw_messages(NULL::dbz_view);

DROP SCHEMA rra CASCADE;
DROP SERVER kafka CASCADE;
DROP ROLE regress_rra_owner, regress_rra_reader, regress_rra_stranger;
DROP EXTENSION pageinspect;
DROP EXTENSION amcheck;
RESET search_path;
