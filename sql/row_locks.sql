--
-- Row locks on source tables, within one session (test/isolation/specs/
-- row_locks.spec has them between sessions): FOR UPDATE and the other
-- strengths lock the current rows, leave the log alone, and cannot lock
-- the rows of a past time.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE src (k int, v text) SERVER kafka OPTIONS (topic 'src');
CREATE TABLE pln (k int, v text);
CREATE EXTENSION pgrowlocks;
INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c');
INSERT INTO pln VALUES (1, 'a'), (2, 'b'), (3, 'c');
SELECT count(*) AS batches_before FROM source_writes.batches WHERE source = 'src'::regclass \gset

-- the plan locks the source's rows, which the scan identifies by ctid
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM src WHERE k = 1 FOR UPDATE;
EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM src JOIN pln USING (k) FOR SHARE OF pln;

BEGIN;
SELECT * FROM src WHERE k = 1 FOR UPDATE;
SELECT * FROM src WHERE k = 2 FOR NO KEY UPDATE;
SELECT * FROM src WHERE k = 3 FOR SHARE;
SELECT * FROM src WHERE k = 3 FOR KEY SHARE;
-- the locked rows show in the hidden tuples' lockers, as a plain table's
SELECT s.k, l.modes
FROM src s, pgrowlocks((SELECT current_rel::text FROM source_writes.source_tables
                        WHERE relid = 'src'::regclass)) l
WHERE l.locked_row = s.ctid ORDER BY s.k;
-- the holder edits what it locked
UPDATE src SET v = 'locked and updated' WHERE k = 1;
SELECT * FROM src WHERE k = 1 FOR UPDATE;
DELETE FROM src WHERE k = 2;
SELECT * FROM src ORDER BY k FOR UPDATE;
ROLLBACK;

-- locking writes nothing to the log
BEGIN;
SELECT * FROM src ORDER BY k FOR UPDATE;
COMMIT;
SELECT count(*) - :batches_before AS new_batches
FROM source_writes.batches WHERE source = 'src'::regclass;

-- in a join, a subquery, a cursor; WHERE CURRENT OF is a plain table's
-- only, as for any foreign table
SELECT * FROM src JOIN pln USING (k) WHERE k = 2 FOR UPDATE;
SELECT * FROM (SELECT * FROM src WHERE k > 1 FOR UPDATE) s ORDER BY k;
BEGIN;
DECLARE c CURSOR FOR SELECT * FROM src ORDER BY k FOR UPDATE;
FETCH c;
UPDATE src SET v = 'current' WHERE CURRENT OF c;
ROLLBACK;

-- reading the past cannot lock; reading it without a lock can, also with a
-- plan made before
SELECT upper - 1 AS past FROM source_writes.frontiers('src') \gset
PREPARE locking AS SELECT * FROM src WHERE k = 1 FOR UPDATE;
SET source_writes.as_of = :past;
SELECT * FROM src WHERE k = 1 FOR UPDATE;
SELECT * FROM src JOIN pln USING (k) WHERE k = 1 FOR KEY SHARE OF src;
EXECUTE locking;
SELECT * FROM src JOIN pln USING (k) WHERE k = 1 FOR UPDATE OF pln;
RESET source_writes.as_of;
EXECUTE locking;

-- errors are said of the source by the hidden relations' names only: the
-- name of the current heap becomes the table's, in the texts and in the
-- fields; a longer name that contains it, and the fields of an error about
-- another relation, stay as they are
SELECT c.relname AS hidden FROM source_writes.source_tables st
  JOIN pg_class c ON c.oid = st.current_rel WHERE st.relid = 'src'::regclass \gset
SET test.hidden = :'hidden';
CREATE FUNCTION complain(k int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  name text := current_setting('test.hidden') || CASE k WHEN 98 THEN '' ELSE '_archive' END;
BEGIN
  IF k IN (98, 99) THEN
    RAISE EXCEPTION 'relation "%" is full', name
      USING DETAIL = format('Table %s has no room.', name),
            SCHEMA = 'source_writes_internal', TABLE = name;
  END IF;
  RETURN true;
END
$$;
CREATE FUNCTION error_of(k int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  message text;
  detail text;
  schema text;
  tab text;
BEGIN
  INSERT INTO src VALUES (k, 'complains');
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
    schema = SCHEMA_NAME, tab = TABLE_NAME;
  RETURN replace(concat_ws(' | ', message, detail, schema, tab),
                 current_setting('test.hidden'), '<hidden>');
END
$$;
ALTER FOREIGN TABLE src ADD CONSTRAINT complains CHECK (complain(k));
SELECT k, error_of(k) FROM (VALUES (98), (99)) v(k);
ALTER FOREIGN TABLE src DROP CONSTRAINT complains;
DROP FUNCTION error_of(int), complain(int);
RESET test.hidden;

DROP TABLE pln;
DROP SERVER kafka CASCADE;
DROP EXTENSION pgrowlocks;
