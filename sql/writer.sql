--
-- The writer, as the workers will use it: rows written with an origin of
-- their own, as the table's owner, in a security-restricted operation;
-- upserts that replace the current row of a key whoever wrote it (a
-- user's edit included), bring back a key a user deleted, and tombstones
-- that retract the current row of a key if there is one.  The log stays
-- a log of whole row instances: no multiplicity ever goes below zero.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE ROLE regress_writer_owner;
CREATE ROLE regress_writer_editor;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
GRANT USAGE ON FOREIGN SERVER kafka TO regress_writer_owner;
CREATE SCHEMA w AUTHORIZATION regress_writer_owner;
SET search_path = w, public;

-- the log, with timestamps as ranks and multiplicities summed up to each
CREATE FUNCTION w.log(src anyelement)
RETURNS TABLE (tx bigint, diff int, origin text, role name, data text)
LANGUAGE sql AS $$
  SELECT dense_rank() OVER (ORDER BY u.ts), u.diff, u.origin, u.role, u.data::text
  FROM source_writes.updates(src) u
  ORDER BY 1, 2 DESC, 5
$$;
CREATE FUNCTION w.lowest_multiplicity(src anyelement) RETURNS bigint
LANGUAGE sql AS $$
  SELECT min(running) FROM
    (SELECT sum(diff) OVER (PARTITION BY data::text ORDER BY ts) AS running
     FROM source_writes.updates(src)) r
$$;

SET ROLE regress_writer_owner;
CREATE FOREIGN TABLE w.kv (k int, v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
CREATE FOREIGN TABLE w.events (id int, v text) SERVER kafka OPTIONS (topic 'events');
GRANT SELECT, INSERT, UPDATE, DELETE ON w.kv, w.events TO regress_writer_editor;
GRANT USAGE ON SCHEMA w TO regress_writer_editor;
RESET ROLE;

-- a worker appends, as the owner, with its origin
SELECT test_write('events', 'kafka', 'append',
                  ARRAY[ROW(1, 'one'), ROW(2, 'two'), ROW(3, 'three')]::events[]);
SELECT test_write('events', 'webhook', 'insert', ARRAY[ROW(4, 'four')]::events[]);
SELECT * FROM events ORDER BY id;
SELECT tx, diff, origin, role, data FROM log(NULL::events);

-- an upsert source: the first rows of two keys, then a user's edits
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a'), ROW(2, 'b'), ROW(3, 'c')]::kv[]);
SET ROLE regress_writer_editor;
UPDATE kv SET v = 'edited by a user' WHERE k = 1;
DELETE FROM kv WHERE k = 2;
RESET ROLE;
SELECT * FROM kv ORDER BY k;

-- the next messages: the edited row is replaced, the deleted key comes back
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a2'), ROW(2, 'b2')]::kv[]);
SELECT * FROM kv ORDER BY k;

-- a tombstone after a user's edit deletes the edited row; one for a key
-- with no row, or one the user deleted, is a no-op
SET ROLE regress_writer_editor;
UPDATE kv SET v = 'edited again' WHERE k = 3;
DELETE FROM kv WHERE k = 2;
RESET ROLE;
SELECT test_write('kv', 'kafka', 'tombstone',
                  ARRAY[ROW(3, NULL), ROW(2, NULL), ROW(99, NULL)]::kv[]);
SELECT * FROM kv ORDER BY k;

-- several messages for one key in one batch: the last one stays, and the
-- log shows only it (a transaction is one instant)
SELECT test_write('kv', 'kafka', 'upsert',
                  ARRAY[ROW(5, 'x'), ROW(5, 'y'), ROW(1, 'a3'), ROW(5, 'z')]::kv[]);
SELECT * FROM kv ORDER BY k;

-- a user's upsert in the same transaction as their edit of the key
BEGIN;
UPDATE kv SET v = 'mine' WHERE k = 5;
SELECT test_write('kv', 'user', 'upsert', ARRAY[ROW(5, 'mine, then upserted')]::kv[]);
COMMIT;

-- the whole log: who wrote what; nothing ever below zero; it consolidates
-- to the contents
SELECT tx, diff, origin,
       CASE WHEN role = current_user THEN '(me)' ELSE role::text END AS role, data
FROM log(NULL::kv);
SELECT lowest_multiplicity(NULL::kv);
SELECT (SELECT array_agg(d ORDER BY d) FROM
          (SELECT (data).k || ':' || (data).v AS d, sum(diff) AS n
           FROM source_writes.updates(NULL::kv) GROUP BY 1) u, generate_series(1, u.n))
     = (SELECT array_agg(k || ':' || v ORDER BY k || ':' || v) FROM kv) AS log_matches;

-- keys are complete, and upserts need a key
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(NULL, 'no key')]::kv[]);
SELECT test_write('events', 'kafka', 'upsert', ARRAY[ROW(1, 'x')]::events[]);
SELECT test_write('events', 'kafka', 'tombstone', ARRAY[ROW(1, 'x')]::events[]);
SELECT test_write('kv', 'kafka', 'append', ARRAY[ROW(1, 'taken')]::kv[]);
SELECT test_write('kv', 'nobody', 'append', ARRAY[ROW(1, 'x')]::kv[]);

-- What the writer runs for a worker runs as the table's owner, in a
-- security-restricted operation: here a CHECK constraint's function.
CREATE FUNCTION w.who(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'checked as %, superuser: %', current_user,
    (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user);
  IF v = 'escape' THEN
    CREATE TEMP TABLE escape_hatch (x int);
  END IF;
  RETURN true;
END $$;
SET ROLE regress_writer_owner;
CREATE FOREIGN TABLE w.checked (id int, v text CHECK (w.who(v))) SERVER kafka
  OPTIONS (topic 'checked');
RESET ROLE;
SELECT current_user = (SELECT rolname FROM pg_roles WHERE oid = 10) AS superuser_calls;
SELECT test_write('checked', 'kafka', 'append', ARRAY[ROW(1, 'fine')]::checked[]);
SELECT test_write('checked', 'kafka', 'append', ARRAY[ROW(2, 'escape')]::checked[]);
SELECT id, v FROM checked;
SELECT origin, role FROM source_writes.batches WHERE source = 'checked'::regclass;
SELECT current_user = (SELECT rolname FROM pg_roles WHERE oid = 10) AS still_superuser;

RESET search_path;
DROP SCHEMA w CASCADE;
DROP SERVER kafka CASCADE;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
DROP ROLE regress_writer_owner;
DROP ROLE regress_writer_editor;
