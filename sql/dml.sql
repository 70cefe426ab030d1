--
-- DML on source tables.  Every committed transaction's edits to a source
-- are one batch at one fresh timestamp in the source's log.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE events (id int, kind text, amount numeric, note text)
  SERVER kafka OPTIONS (topic 'events');
CREATE TABLE plain (id int, kind text, amount numeric, note text);

-- The log with each batch's timestamp shown as its rank (1 = first batch),
-- so that the output does not depend on the clock.
CREATE FUNCTION log_of(src anyelement)
RETURNS TABLE (batch bigint, diff int, origin text, role text, data text)
LANGUAGE sql AS $$
  SELECT dense_rank() OVER (ORDER BY u.ts), u.diff, u.origin,
         CASE WHEN u.role = (SELECT rolname FROM pg_roles WHERE oid = 10)
              THEN '(superuser)' ELSE u.role::text END,
         u.data::text
  FROM source_writes.updates(src) u
  ORDER BY 1, 2 DESC, 5
$$;

-- An error, with timestamps (13 digits) replaced, to show range errors.
CREATE FUNCTION show_error(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  msg text; det text; hint text;
BEGIN
  EXECUTE query;
  RETURN 'no error';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                          hint = PG_EXCEPTION_HINT;
  RETURN regexp_replace(format(E'%s: %s\nDETAIL: %s\nHINT: %s', SQLSTATE, msg, det, hint),
                        '[0-9]{13}', '<ts>', 'g');
END
$$;

-- EXPLAIN, with timestamps replaced.
CREATE FUNCTION explain_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    RETURN NEXT regexp_replace(line, '[0-9]{13}', '<ts>', 'g');
  END LOOP;
END
$$;

-- The log consolidated up to t (all of it without t): the rows whose
-- diffs sum to a positive count, that many times each.
CREATE FUNCTION consolidated(src anyelement, t bigint DEFAULT NULL)
RETURNS SETOF anyelement LANGUAGE sql AS $$
  SELECT u.data
  FROM (SELECT data, sum(diff) AS n
        FROM source_writes.updates(src, until => t + 1) GROUP BY data) u
  CROSS JOIN LATERAL generate_series(1, u.n)
  WHERE u.n > 0
$$;

-- Does reading events as of each of its batches give the log consolidated
-- up to that batch?
CREATE FUNCTION as_of_matches_log() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
  differences bigint;
BEGIN
  FOR t IN SELECT ts FROM source_writes.batches WHERE source = 'events'::regclass
  LOOP
    PERFORM set_config('source_writes.as_of', t::text, true);
    SELECT count(*) INTO differences FROM (
      (SELECT * FROM events EXCEPT ALL SELECT * FROM consolidated(NULL::events, t))
      UNION ALL
      (SELECT * FROM consolidated(NULL::events, t) EXCEPT ALL SELECT * FROM events)) d;
    IF differences > 0 THEN
      RETURN false;
    END IF;
  END LOOP;
  PERFORM set_config('source_writes.as_of', '', true);
  RETURN true;
END
$$;

--
-- INSERT
--
INSERT INTO events VALUES (1, 'order', 10.5, NULL);
INSERT INTO events VALUES (2, 'order', 20, 'big'), (3, 'refund', -5, NULL)
RETURNING id, kind, ctid;
INSERT INTO events (id, kind) SELECT g, 'bulk' FROM generate_series(4, 6) g;
PREPARE ins(int, text) AS INSERT INTO events (id, kind) VALUES ($1, $2);
EXECUTE ins(7, 'prepared');
EXECUTE ins(8, 'prepared');
-- COPY goes through the batch insert path
-- a bad line fails the whole COPY and writes nothing
COPY events FROM stdin;
9	copied	1.5	\N
10	copied	2.5	with a tab	too many
\.
COPY events FROM stdin;
9	copied	1.5	\N
10	copied	2.5	tab
\.
SELECT * FROM events ORDER BY id, note;
SELECT * FROM log_of(NULL::events);
-- COPY writes with the command id of its own command, as into a plain
-- table: a cursor declared before it in the transaction does not see its
-- rows (those of an INSERT before the cursor it does)
BEGIN;
INSERT INTO events (id, kind) VALUES (90, 'cursor');
INSERT INTO plain (id, kind) VALUES (90, 'cursor');
DECLARE source_cursor CURSOR FOR SELECT id, kind FROM events WHERE kind = 'cursor' ORDER BY id;
DECLARE plain_cursor CURSOR FOR SELECT id, kind FROM plain WHERE kind = 'cursor' ORDER BY id;
COPY events (id, kind) FROM stdin;
91	cursor
\.
COPY plain (id, kind) FROM stdin;
91	cursor
\.
FETCH ALL source_cursor;
FETCH ALL plain_cursor;
SELECT id, kind FROM events WHERE kind = 'cursor' ORDER BY id;
ROLLBACK;
-- COPY collects a source's rows and writes them in groups only where
-- nothing that runs during the COPY could miss them: a volatile default
-- (for which PostgreSQL inserts a plain table's rows one at a time), or
-- the triggers of other partitions that a partitioned table routes rows
-- to, read the rows copied before them, as on plain tables
CREATE FUNCTION rows_in(t regclass) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s', t) INTO n;
  RETURN n;
END
$$;
CREATE FOREIGN TABLE copied (a int, seen bigint DEFAULT rows_in('copied'))
  SERVER kafka OPTIONS (topic 'copied');
CREATE TABLE copied_plain (a int, seen bigint DEFAULT rows_in('copied_plain'));
COPY copied (a) FROM stdin;
1
2
3
\.
COPY copied_plain (a) FROM stdin;
1
2
3
\.
SELECT * FROM copied ORDER BY a;
SELECT * FROM copied_plain ORDER BY a;
CREATE FUNCTION note_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.b := NEW.b || ' saw ' || rows_in(TG_ARGV[0]);
  RETURN NEW;
END
$$;
CREATE TABLE routed (a int, b text) PARTITION BY RANGE (a);
CREATE TABLE routed_low PARTITION OF routed FOR VALUES FROM (0) TO (10);
CREATE FOREIGN TABLE routed_high PARTITION OF routed FOR VALUES FROM (10) TO (20)
  SERVER kafka OPTIONS (topic 'routed');
CREATE TRIGGER note_seen BEFORE INSERT ON routed_low
  FOR EACH ROW EXECUTE FUNCTION note_seen('routed_high');
CREATE TABLE routed_plain (a int, b text) PARTITION BY RANGE (a);
CREATE TABLE routed_plain_low PARTITION OF routed_plain FOR VALUES FROM (0) TO (10);
CREATE TABLE routed_plain_high PARTITION OF routed_plain FOR VALUES FROM (10) TO (20);
CREATE TRIGGER note_seen BEFORE INSERT ON routed_plain_low
  FOR EACH ROW EXECUTE FUNCTION note_seen('routed_plain_high');
COPY routed FROM stdin;
11	high
1	low
12	high
2	low
\.
COPY routed_plain FROM stdin;
11	high
1	low
12	high
2	low
\.
SELECT * FROM routed ORDER BY a;
SELECT * FROM routed_plain ORDER BY a;
DROP TABLE routed, routed_plain, copied_plain;
DROP FOREIGN TABLE copied;
DROP FUNCTION note_seen(), rows_in(regclass);

-- COPY and INSERT ... SELECT write rows in batches: the WAL has a few
-- multi-insert records for the current heap, not a record per row
CREATE EXTENSION pg_walinspect;
CREATE FOREIGN TABLE bulk (id int, kind text) SERVER kafka OPTIONS (topic 'bulk');
CREATE FUNCTION heap_records_since(start pg_lsn)
RETURNS TABLE (record_type text, records bigint) LANGUAGE sql AS $$
  SELECT regexp_replace(record_type, '\+INIT$', ''), count(*)
  FROM pg_get_wal_records_info(start, pg_current_wal_flush_lsn())
  WHERE resource_manager IN ('Heap', 'Heap2')
    AND block_ref LIKE '%/' || pg_relation_filenode(
          (SELECT current_rel FROM source_writes.source_tables
           WHERE relid = 'bulk'::regclass)) || ' %'
  GROUP BY 1 ORDER BY 1
$$;
SELECT pg_current_wal_insert_lsn() AS wal_start \gset
COPY bulk FROM PROGRAM 'seq 101 350 | sed "s/$/\tcopied/"';
SELECT record_type, records <= 10 AS a_few_for_250_rows FROM heap_records_since(:'wal_start');
SELECT pg_current_wal_insert_lsn() AS wal_start \gset
INSERT INTO bulk SELECT g, 'selected' FROM generate_series(351, 600) g;
SELECT record_type, records <= 10 AS a_few_for_250_rows FROM heap_records_since(:'wal_start');
-- with RETURNING each row comes back at once: a record per row
SELECT pg_current_wal_insert_lsn() AS wal_start \gset
INSERT INTO bulk SELECT g, 'returned' FROM generate_series(601, 603) g RETURNING id;
SELECT * FROM heap_records_since(:'wal_start');
-- all rows arrived intact
SELECT kind, count(*), sum(id) FROM bulk GROUP BY kind ORDER BY kind;
DROP FOREIGN TABLE bulk;
DROP FUNCTION heap_records_since(pg_lsn);
DROP EXTENSION pg_walinspect;

-- a statement does not see its own effects: this doubles the table once
INSERT INTO events SELECT * FROM events WHERE kind = 'bulk';
SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind;

--
-- UPDATE
--
UPDATE events SET amount = coalesce(amount, 0) + 1 WHERE kind = 'order'
RETURNING id, amount;
-- every row once, however many rows
UPDATE events SET amount = coalesce(amount, 0) + 100 WHERE kind = 'bulk';
SELECT id, amount FROM events WHERE kind = 'bulk' ORDER BY id, ctid;
-- UPDATE ... FROM a join that matches a row twice still touches it once
CREATE TABLE fixes (id int, note text);
INSERT INTO fixes VALUES (1, 'first fix'), (1, 'second fix'), (3, 'refunded');
UPDATE events e SET note = f.note FROM fixes f WHERE e.id = f.id
RETURNING e.id, e.note IN ('first fix', 'second fix', 'refunded') AS fixed;
SELECT id, note FROM events WHERE id IN (1, 3) ORDER BY id;
-- the log: an update is a retraction and an addition in one batch
SELECT * FROM log_of(NULL::events) WHERE batch >= 7;

--
-- DELETE
--
DELETE FROM events WHERE kind = 'copied' RETURNING *;
-- one instance of a duplicated row, by its identity
DELETE FROM events WHERE ctid = (SELECT min(ctid) FROM events WHERE id = 4);
SELECT id, count(*) FROM events WHERE kind = 'bulk' GROUP BY id ORDER BY id;
DELETE FROM events WHERE id = 999;

--
-- transactions: read your own edits, savepoints, rollback
--
SELECT count(*) AS batches_before FROM source_writes.batches
WHERE source = 'events'::regclass \gset
BEGIN;
INSERT INTO events VALUES (20, 'tx', 1, NULL);
SELECT id, kind FROM events WHERE id = 20;
UPDATE events SET note = 'in tx' WHERE id = 20;
SAVEPOINT before_mistake;
DELETE FROM events;
SELECT count(*) FROM events;
ROLLBACK TO before_mistake;
SELECT count(*) > 0 AS rows_back FROM events;
SAVEPOINT another;
INSERT INTO events VALUES (21, 'tx', 1, 'released');
RELEASE another;
COMMIT;
SELECT id, note FROM events WHERE kind = 'tx' ORDER BY id;
-- the whole transaction is one batch, without what was rolled back
SELECT * FROM log_of(NULL::events)
WHERE batch = (SELECT max(batch) FROM log_of(NULL::events));
SELECT count(*) - :batches_before AS new_batches FROM source_writes.batches
WHERE source = 'events'::regclass;

-- a rolled back transaction leaves no batch and no rows
BEGIN;
INSERT INTO events VALUES (30, 'gone', 0, NULL);
DELETE FROM events WHERE id = 1;
ROLLBACK;
-- nor does one whose only writes were rolled back to a savepoint
BEGIN;
SAVEPOINT s;
INSERT INTO events VALUES (31, 'gone', 0, NULL);
ROLLBACK TO s;
COMMIT;
-- nor a statement that changed nothing
UPDATE events SET note = 'never' WHERE false;
SELECT count(*) - :batches_before AS new_batches FROM source_writes.batches
WHERE source = 'events'::regclass;
SELECT count(*) FROM events WHERE kind = 'gone';

--
-- TRUNCATE is a retraction of every row, in the log
--
CREATE FOREIGN TABLE scratch (v int) SERVER kafka OPTIONS (topic 'scratch');
INSERT INTO scratch VALUES (1), (2), (2);
BEGIN;
INSERT INTO scratch VALUES (3);
TRUNCATE scratch;
INSERT INTO scratch VALUES (4);
COMMIT;
SELECT * FROM scratch;
SELECT * FROM log_of(NULL::scratch);
-- rolled back, it changes nothing
BEGIN;
TRUNCATE scratch;
ROLLBACK;
SELECT * FROM scratch;

--
-- the controller: one timestamp per committed batch, strictly increasing,
-- and upper just after the last one
--
SELECT count(*) = count(DISTINCT ts) AS distinct_timestamps
FROM source_writes.batches WHERE source = 'events'::regclass;
SELECT f.upper = (SELECT max(ts) + 1 FROM source_writes.batches
                  WHERE source = 'events'::regclass) AS upper_follows_last_batch,
       f.since < f.upper AS readable
FROM source_writes.frontiers('events') f;
-- a transaction that writes several sources gets one timestamp for all
BEGIN;
INSERT INTO scratch VALUES (5);
INSERT INTO events VALUES (40, 'pair', 0, NULL);
COMMIT;
SELECT count(DISTINCT source) AS sources, count(*) AS batches
FROM source_writes.batches b
WHERE b.ts = (SELECT max(ts) FROM source_writes.batches
              WHERE source = 'scratch'::regclass);
SELECT (SELECT upper FROM source_writes.frontiers('events')) =
       (SELECT upper FROM source_writes.frontiers('scratch')) AS same_upper;
-- a source dropped in the transaction that wrote it needs no batch
BEGIN;
INSERT INTO scratch VALUES (6);
DROP FOREIGN TABLE scratch;
COMMIT;
SELECT count(*) AS batches_of_dropped FROM source_writes.batches
WHERE source NOT IN (SELECT relid FROM source_writes.source_tables);

--
-- time: reading as of a past timestamp
--
SELECT upper - 1 AS t1 FROM source_writes.frontiers('events') \gset
SELECT count(*) AS rows_at_t1, sum(id) AS ids_at_t1 FROM events \gset
UPDATE events SET amount = -1 WHERE kind = 'order';
DELETE FROM events WHERE kind = 'bulk';
INSERT INTO events VALUES (50, 'later', 0, NULL);
SELECT upper - 1 AS t2 FROM source_writes.frontiers('events') \gset
SET source_writes.as_of = :t1;
SELECT count(*) = :rows_at_t1 AS same_count, sum(id) = :ids_at_t1 AS same_ids FROM events;
SELECT id, amount FROM events WHERE kind = 'order' ORDER BY id;
SELECT explain_of('SELECT * FROM events');
-- the same time gives the same rows after more edits
RESET source_writes.as_of;
INSERT INTO events VALUES (51, 'later still', 0, NULL);
DELETE FROM events WHERE kind = 'order';
SET source_writes.as_of = :t1;
SELECT count(*) = :rows_at_t1 AS still_same_count, sum(id) = :ids_at_t1 AS still_same_ids
FROM events;
SET source_writes.as_of = :t2;
SELECT id, kind FROM events WHERE kind IN ('order', 'later', 'later still') ORDER BY id;
-- in parallel too
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET source_writes.as_of = :t1;
SELECT explain_of('SELECT count(*) FROM events');
SELECT count(*) = :rows_at_t1 AS same_count, sum(id) = :ids_at_t1 AS same_ids FROM events;
RESET source_writes.as_of;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_tuple_cost;
RESET parallel_setup_cost;
-- as of the time of each batch, the contents are the log consolidated
-- up to it
SELECT as_of_matches_log() AS every_batch_matches;
RESET source_writes.as_of;
-- outside the readable range: an error that names the range
SELECT show_error('SET source_writes.as_of = 1; SELECT * FROM events');
RESET source_writes.as_of;
SELECT show_error(format('SET source_writes.as_of = %s; SELECT * FROM events', :t2 + 1000000));
RESET source_writes.as_of;
-- garbage is refused when set
SET source_writes.as_of = 'yesterday';
SET source_writes.as_of = '-5';
-- and no writing while reading the past
SET source_writes.as_of = :t1;
INSERT INTO events VALUES (60, 'no', 0, NULL);
UPDATE events SET note = 'no';
DELETE FROM events;
TRUNCATE events;
RESET source_writes.as_of;
SELECT count(*) FROM events WHERE id = 60;

--
-- the log, since and until
--
SELECT count(*) AS all_updates FROM source_writes.updates(NULL::events);
SELECT count(*) = 0 AS none_before_t1_plus_1
FROM source_writes.updates(NULL::events, since => :t1 + 1) WHERE ts <= :t1;
SELECT bool_and(ts >= :t1 AND ts < :t2) AS in_window
FROM source_writes.updates(NULL::events, since => :t1, until => :t2);
SELECT show_error('SELECT * FROM source_writes.updates(NULL::events, since => 0)');
SELECT show_error('SELECT * FROM source_writes.updates(NULL::plain)');
SELECT show_error('SELECT * FROM source_writes.updates(NULL::int)');
SELECT show_error($$SELECT * FROM source_writes.frontiers('plain')$$);

--
-- columns added after a table was created come after our own columns in
-- its hidden heaps: rows are copied to their places, and so is the log
--
CREATE FOREIGN TABLE grown (id int, v text) SERVER kafka OPTIONS (topic 'grown');
INSERT INTO grown VALUES (1, 'a'), (2, 'b'), (3, 'c');
ALTER FOREIGN TABLE grown ADD COLUMN extra text, DROP COLUMN v;
SELECT upper - 1 AS grown_before FROM source_writes.frontiers('grown') \gset
INSERT INTO grown VALUES (4, 'new');
UPDATE grown SET extra = 'set' WHERE id IN (1, 4);
DELETE FROM grown WHERE id = 2;
SELECT * FROM grown ORDER BY id;
SELECT * FROM log_of(NULL::grown);
SET source_writes.as_of = :grown_before;
SELECT * FROM grown ORDER BY id;
RESET source_writes.as_of;
TRUNCATE grown;
SELECT count(*) AS rows, (SELECT sum(diff) FROM source_writes.updates(NULL::grown)) AS consolidated
FROM grown;

--
-- upsert sources: one current row per key
--
CREATE FOREIGN TABLE prices (sku text, region text, price numeric)
  SERVER kafka OPTIONS (topic 'prices', envelope 'upsert', key 'sku, region');
INSERT INTO prices VALUES ('a', 'eu', 10), ('a', 'us', 12), ('b', 'eu', 5);
INSERT INTO prices VALUES ('a', 'eu', 11);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO prices VALUES ('c', 'eu', 1), ('c', 'eu', 2);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO prices VALUES (NULL, 'eu', 1);
\echo :LAST_ERROR_SQLSTATE
UPDATE prices SET region = 'eu' WHERE sku = 'a' AND region = 'us';
\echo :LAST_ERROR_SQLSTATE
UPDATE prices SET price = price * 2 WHERE sku = 'a';
UPDATE prices SET sku = 'z' WHERE sku = 'b';
DELETE FROM prices WHERE sku = 'a' AND region = 'us';
SELECT * FROM prices ORDER BY sku, region;
-- the delete is a tombstone: the key's last update retracts it
SELECT * FROM log_of(NULL::prices);
-- COPY checks keys row by row too
COPY prices FROM stdin;
d	eu	4
d	eu	5
\.
SELECT count(*) FROM prices WHERE sku = 'd';

-- keys compare with their type's equality: 1.0 and 1.00 are one numeric
-- key, as 0 and -0 are one float key
CREATE FOREIGN TABLE amounts (k numeric, v int)
  SERVER kafka OPTIONS (topic 'amounts', envelope 'upsert', key 'k');
INSERT INTO amounts VALUES (1.0, 1), (2, 2);
UPDATE amounts SET k = 1.00 WHERE k = 1;
SELECT * FROM amounts ORDER BY k;
INSERT INTO amounts VALUES (1, 3);
\echo :LAST_ERROR_SQLSTATE
UPDATE amounts SET k = 2.000 WHERE k = 1;
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE zeros (k float8, v int)
  SERVER kafka OPTIONS (topic 'zeros', envelope 'upsert', key 'k');
INSERT INTO zeros VALUES (0, 1);
UPDATE zeros SET k = '-0' WHERE k = 0;
SELECT k::text, v FROM zeros;
DROP FOREIGN TABLE amounts, zeros;

--
-- a source table that is a partition keeps to its partition's bounds
--
CREATE TABLE pp (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE pp_local PARTITION OF pp FOR VALUES FROM (0) TO (100);
CREATE FOREIGN TABLE pp_src PARTITION OF pp FOR VALUES FROM (100) TO (200)
  SERVER kafka OPTIONS (topic 'pp');
INSERT INTO pp VALUES (150, 'routed'), (50, 'local');
INSERT INTO pp_src VALUES (160, 'direct');
INSERT INTO pp_src VALUES (999, 'out of bounds');
\echo :LAST_ERROR_SQLSTATE
UPDATE pp_src SET id = 5 WHERE id = 150;
\echo :LAST_ERROR_SQLSTATE
UPDATE pp SET id = 5 WHERE id = 150;
\echo :LAST_ERROR_SQLSTATE
COPY pp_src FROM stdin;
170	copied
250	out of bounds
\.
\echo :LAST_ERROR_SQLSTATE
INSERT INTO pp_src SELECT 180, 'selected' UNION ALL SELECT 300, 'out of bounds';
\echo :LAST_ERROR_SQLSTATE
SELECT tableoid::regclass, * FROM pp ORDER BY id;
SELECT * FROM pp WHERE id = 5;
-- an UPDATE of the parent that moves a row into the source partition,
-- which it also updates
UPDATE pp SET id = CASE WHEN id < 100 THEN id + 100 ELSE id + 1 END;
SELECT tableoid::regclass, * FROM pp ORDER BY id;
SELECT diff, data FROM source_writes.updates(NULL::pp_src) ORDER BY ts, diff DESC, data::text;
-- rows copied through the parent are all there for its statement triggers
CREATE FUNCTION count_pp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'pp has % rows', (SELECT count(*) FROM pp);
  RETURN NULL;
END
$$;
CREATE TRIGGER count_pp AFTER INSERT ON pp FOR EACH STATEMENT EXECUTE FUNCTION count_pp();
COPY pp FROM stdin;
120	copied
121	copied
20	copied
\.
DROP TRIGGER count_pp ON pp;
DROP FUNCTION count_pp();
-- ON CONFLICT is refused on source tables, also for rows routed to them
INSERT INTO pp VALUES (190, 'x') ON CONFLICT DO NOTHING;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO pp VALUES (60, 'x') ON CONFLICT DO NOTHING;
SELECT count(*) FROM pp;
DROP TABLE pp;

-- a source table's NOT NULL and CHECK constraints hold, as for a table
CREATE FOREIGN TABLE checked (id int NOT NULL CHECK (id > 0), v text)
  SERVER kafka OPTIONS (topic 'checked');
INSERT INTO checked VALUES (1, 'fine');
INSERT INTO checked VALUES (NULL, 'no id');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO checked SELECT -g, 'negative' FROM generate_series(1, 3) g;
\echo :LAST_ERROR_SQLSTATE
UPDATE checked SET id = 0;
\echo :LAST_ERROR_SQLSTATE
COPY checked FROM stdin;
2	fine
-2	negative
\.
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM checked;
-- constraints added later hold for the rows the table has, as they do
-- for a plain table's
INSERT INTO checked VALUES (5, NULL), (6, 'six');
ALTER FOREIGN TABLE checked ADD CONSTRAINT small CHECK (id < 6);
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE checked ALTER COLUMN v SET NOT NULL;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE checked ADD COLUMN w int NOT NULL;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE checked ADD CONSTRAINT small CHECK (id < 6) NOT VALID;
ALTER FOREIGN TABLE checked VALIDATE CONSTRAINT small;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM checked WHERE id >= 5;
ALTER FOREIGN TABLE checked VALIDATE CONSTRAINT small;
ALTER FOREIGN TABLE checked ALTER COLUMN v SET NOT NULL;
SELECT * FROM checked;
-- AFTER triggers of a statement see the log of the batches before it
-- whole: the rows the statement retracted are in the history already
CREATE FUNCTION log_size() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'the log of checked has % updates', (SELECT count(*) FROM source_writes.updates(NULL::checked));
  RETURN NULL;
END
$$;
CREATE TRIGGER log_size AFTER UPDATE OR DELETE ON checked
  FOR EACH STATEMENT EXECUTE FUNCTION log_size();
UPDATE checked SET v = 'changed';
DELETE FROM checked;
-- also those of another table of the statement
INSERT INTO checked VALUES (3, 'three');
CREATE TABLE gone (id int, v text);
CREATE TRIGGER log_size AFTER INSERT ON gone FOR EACH STATEMENT EXECUTE FUNCTION log_size();
WITH d AS (DELETE FROM checked RETURNING *) INSERT INTO gone SELECT * FROM d;
DROP TABLE gone;
DROP FOREIGN TABLE checked;
DROP FUNCTION log_size();

-- compaction writes: it is refused in a read-only transaction
BEGIN READ ONLY;
SELECT source_writes.compact('events');
ROLLBACK;

-- source_writes.as_of takes a plain number of milliseconds, nothing else
SET source_writes.as_of = ' 123';
SET source_writes.as_of = '+5';
SET source_writes.as_of = '12e3';
SET source_writes.as_of = '99999999999999999999';
SHOW source_writes.as_of;

--
-- privileges are the foreign table's; without SELECT, errors show no data
--
CREATE ROLE regress_sw_writer;
GRANT INSERT ON events, prices TO regress_sw_writer;
SET ROLE regress_sw_writer;
INSERT INTO events VALUES (70, 'by writer', 0, NULL);
SELECT * FROM events;
UPDATE events SET note = 'x';
DELETE FROM events;
TRUNCATE events;
SELECT * FROM source_writes.updates(NULL::events);
SELECT * FROM source_writes.frontiers('events');
SELECT source_writes.channel('events');
SELECT source_writes.compact('events');
SET source_writes.as_of = 1;
SELECT * FROM events;
RESET source_writes.as_of;
INSERT INTO prices VALUES ('z', 'eu', 1);
RESET ROLE;
GRANT SELECT, UPDATE ON events TO regress_sw_writer;
SET ROLE regress_sw_writer;
UPDATE events SET note = 'by writer' WHERE id = 70;
SELECT count(*) FROM source_writes.updates(NULL::events) WHERE (data).id = 70;
RESET ROLE;
SELECT diff, origin, role, data FROM log_of(NULL::events) WHERE data LIKE '(70,%';
REVOKE ALL ON events, prices FROM regress_sw_writer;
DROP ROLE regress_sw_writer;

--
-- bad input changes nothing
--
SELECT count(*) AS rows_before, sum(id) AS ids_before FROM events \gset
SELECT count(*) AS batches_before FROM source_writes.batches \gset
INSERT INTO events VALUES ('not a number', 'x', 0, NULL);
INSERT INTO events VALUES (80, 'x', 'lots', NULL);
INSERT INTO events VALUES (81, 'x', 0, NULL) ON CONFLICT DO NOTHING;
INSERT INTO events SELECT 82, 'x', 1 / 0, NULL;
UPDATE events SET id = id / 0;
-- DML on a dropped source
CREATE FOREIGN TABLE doomed (v int) SERVER kafka OPTIONS (topic 'doomed');
PREPARE into_doomed AS INSERT INTO doomed VALUES (1);
DROP FOREIGN TABLE doomed;
EXECUTE into_doomed;
-- two-phase commit cannot promise a batch timestamp
BEGIN;
INSERT INTO events VALUES (83, 'x', 0, NULL);
PREPARE TRANSACTION 'with_edits';
SELECT count(*) = :rows_before AND sum(id) = :ids_before AS unchanged FROM events;
SELECT count(*) - :batches_before AS new_batches FROM source_writes.batches;

DROP TABLE plain, fixes;
DROP SERVER kafka CASCADE;
SELECT count(*) AS batches_left FROM source_writes.batches;
