--
-- What ingestion does for a row that a person's edit does too: the rows
-- that the workers write (origins kafka and webhook, written here through
-- their writer, the test door) fire the table's triggers that are enabled
-- REPLICA or ALWAYS, as logical replication's apply fires them, as the
-- table's owner, restricted; ordinary triggers fire for people's edits
-- only.  A BEFORE row trigger may change the row or skip it, and the row
-- meets the table's generated columns and constraints after it; statement
-- triggers fire once per batch.  On upsert sources, a message fires INSERT
-- triggers for a new key and UPDATE triggers for a key that has a row, and
-- a tombstone DELETE triggers, as MERGE would.  Ingested rows keep to the
-- partition bounds of a source that is a partition.  retry_errors() runs
-- the table's code as its owner, and the log names its caller.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
CREATE SERVER ing_kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE ROLE ing_owner;
GRANT USAGE ON FOREIGN SERVER ing_kafka TO ing_owner;
CREATE SCHEMA ing AUTHORIZATION ing_owner;
SET search_path = ing, public;

SET ROLE ing_owner;
-- what fired, by whom, with which search_path; the table's ordinary
-- trigger marks each note: a trigger's own statements are not run in
-- replica mode
CREATE TABLE ing.fired (n serial, event text, who text, path text, k int, v text,
                        marked boolean DEFAULT false);
CREATE FUNCTION ing.mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.marked := true;
  RETURN NEW;
END $$;
CREATE TRIGGER mark BEFORE INSERT ON ing.fired FOR EACH ROW EXECUTE FUNCTION ing.mark();
-- notes the event; BEFORE row triggers skip 'skip', turn 'upper' into
-- 'UPPER', and keep a row whose value is 'keep' from a DELETE
CREATE FUNCTION ing.note() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  nk int;
  nv text;
BEGIN
  IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' THEN
    nk := OLD.k; nv := OLD.v;
  ELSIF TG_LEVEL = 'ROW' AND TG_OP = 'UPDATE' THEN
    nk := NEW.k; nv := OLD.v || ' -> ' || NEW.v;
  ELSIF TG_LEVEL = 'ROW' THEN
    nk := NEW.k; nv := NEW.v;
  END IF;
  INSERT INTO ing.fired (event, who, path, k, v)
  VALUES (TG_NAME || ': ' || TG_WHEN || ' ' || TG_OP || ' ' || TG_LEVEL,
          current_user, current_setting('search_path'), nk, nv);
  IF TG_LEVEL = 'STATEMENT' THEN
    RETURN NULL;
  ELSIF TG_OP = 'DELETE' THEN
    RETURN CASE WHEN TG_WHEN = 'BEFORE' AND OLD.v = 'keep' THEN NULL ELSE OLD END;
  ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'skip' THEN
    RETURN NULL;
  ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'upper' THEN
    NEW.v := 'UPPER';
  END IF;
  RETURN NEW;
END $$;

--
-- An append source: each kind of trigger, each way of enabling it
--
CREATE FOREIGN TABLE ing.ev (k int, v text) SERVER ing_kafka OPTIONS (topic 'ev');
CREATE TRIGGER b_replica BEFORE INSERT ON ing.ev FOR EACH ROW EXECUTE FUNCTION ing.note();
CREATE TRIGGER a_always AFTER INSERT ON ing.ev FOR EACH ROW EXECUTE FUNCTION ing.note();
CREATE TRIGGER s_always BEFORE INSERT ON ing.ev FOR EACH STATEMENT EXECUTE FUNCTION ing.note();
CREATE TRIGGER s_replica AFTER INSERT ON ing.ev FOR EACH STATEMENT EXECUTE FUNCTION ing.note();
CREATE TRIGGER o_origin BEFORE INSERT ON ing.ev FOR EACH ROW EXECUTE FUNCTION ing.note();
CREATE TRIGGER d_disabled AFTER INSERT ON ing.ev FOR EACH ROW EXECUTE FUNCTION ing.note();
ALTER FOREIGN TABLE ing.ev ENABLE REPLICA TRIGGER b_replica;
ALTER FOREIGN TABLE ing.ev ENABLE ALWAYS TRIGGER a_always;
ALTER FOREIGN TABLE ing.ev ENABLE ALWAYS TRIGGER s_always;
ALTER FOREIGN TABLE ing.ev ENABLE REPLICA TRIGGER s_replica;
ALTER FOREIGN TABLE ing.ev DISABLE TRIGGER d_disabled;
RESET ROLE;

-- a Kafka batch of three rows: the statement triggers once, the BEFORE row
-- trigger for each row (one skipped, one changed), the AFTER row trigger
-- for the two written; as the owner, with the owner's code's search_path;
-- the ordinary and the disabled trigger stay quiet
SELECT test_write('ev', 'kafka', 'append', ARRAY[ROW(1, 'a'), ROW(2, 'skip'), ROW(3, 'upper')]::ev[]);
SELECT * FROM ev ORDER BY k;
SELECT event, who, path, k, v, marked FROM fired ORDER BY n;
TRUNCATE fired;
-- a webhook batch alike
SELECT test_write('ev', 'webhook', 'append', ARRAY[ROW(4, 'hook')]::ev[]);
SELECT event, who, k, v FROM fired ORDER BY n;
TRUNCATE fired;
-- a person's INSERT fires the ordinary and the ALWAYS triggers, as the user
INSERT INTO ev VALUES (5, 'user');
SELECT event, who, k, v FROM fired ORDER BY n;
TRUNCATE fired;
-- a session in replica mode fires REPLICA and ALWAYS triggers for its
-- edits, as PostgreSQL does; ingestion fires the same ones whatever the
-- session's mode
SET session_replication_role = replica;
INSERT INTO ev VALUES (6, 'replica');
SELECT test_write('ev', 'kafka', 'append', ARRAY[ROW(7, 'kafka')]::ev[]);
RESET session_replication_role;
SELECT event, who, k, v FROM fired ORDER BY n;
TRUNCATE fired;
-- the log: ingested rows as written, by the owner
SELECT diff, origin, role, (data).k, (data).v FROM source_writes.updates(NULL::ev)
ORDER BY ts, (data).k;

-- the triggers run restricted: a temporary table is refused, and the
-- batch writes nothing
SET ROLE ing_owner;
CREATE FUNCTION ing.temp_table() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  CREATE TEMP TABLE t (x int);
  RETURN NEW;
END $$;
CREATE TRIGGER temp_table BEFORE INSERT ON ing.ev FOR EACH ROW EXECUTE FUNCTION ing.temp_table();
ALTER FOREIGN TABLE ing.ev ENABLE ALWAYS TRIGGER temp_table;
RESET ROLE;
SELECT test_write('ev', 'kafka', 'append', ARRAY[ROW(8, 'restricted')]::ev[]);
SELECT count(*) FROM ev WHERE k = 8;
DROP TRIGGER temp_table ON ev;
TRUNCATE fired;

--
-- Generated columns and constraints come after the BEFORE row triggers,
-- as for INSERT: a trigger may fix a row that a CHECK would refuse
--
SET ROLE ing_owner;
CREATE FUNCTION ing.fix() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 'bad' THEN NEW.v := 'fixed'; NEW.k := NEW.k + 10; END IF;
  RETURN NEW;
END $$;
CREATE FOREIGN TABLE ing.gen (k int, v text CHECK (v <> 'bad'),
                              twice int GENERATED ALWAYS AS (k * 2) STORED)
  SERVER ing_kafka OPTIONS (topic 'gen');
CREATE TRIGGER fix BEFORE INSERT ON ing.gen FOR EACH ROW EXECUTE FUNCTION ing.fix();
ALTER FOREIGN TABLE ing.gen ENABLE ALWAYS TRIGGER fix;
RESET ROLE;
SELECT test_write('gen', 'kafka', 'append', ARRAY[ROW(1, 'bad', NULL), ROW(2, 'good', NULL)]::gen[]);
SELECT * FROM gen ORDER BY k;
-- without the trigger, the CHECK refuses the row
ALTER FOREIGN TABLE gen DISABLE TRIGGER fix;
SELECT test_write('gen', 'kafka', 'append', ARRAY[ROW(3, 'bad', NULL)]::gen[]);

--
-- An upsert source: a message is an INSERT of a new key, an UPDATE of a
-- key's current row (whoever wrote it); a tombstone a DELETE of it;
-- statement triggers of all three once per batch, as for MERGE
--
SET ROLE ing_owner;
CREATE FOREIGN TABLE ing.kv (k int, v text) SERVER ing_kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
CREATE TRIGGER b_row BEFORE INSERT OR UPDATE OR DELETE ON ing.kv
  FOR EACH ROW EXECUTE FUNCTION ing.note();
CREATE TRIGGER a_row AFTER INSERT OR UPDATE OR DELETE ON ing.kv
  FOR EACH ROW EXECUTE FUNCTION ing.note();
CREATE TRIGGER b_stmt BEFORE INSERT OR UPDATE OR DELETE ON ing.kv
  FOR EACH STATEMENT EXECUTE FUNCTION ing.note();
CREATE TRIGGER a_stmt AFTER INSERT OR UPDATE OR DELETE ON ing.kv
  FOR EACH STATEMENT EXECUTE FUNCTION ing.note();
-- an overwrite sets every column: UPDATE OF triggers fire
CREATE TRIGGER a_of_v AFTER UPDATE OF v ON ing.kv
  FOR EACH ROW WHEN (OLD.v IS DISTINCT FROM NEW.v) EXECUTE FUNCTION ing.note();
ALTER FOREIGN TABLE ing.kv ENABLE ALWAYS TRIGGER b_row;
ALTER FOREIGN TABLE ing.kv ENABLE REPLICA TRIGGER a_row;
ALTER FOREIGN TABLE ing.kv ENABLE ALWAYS TRIGGER b_stmt;
ALTER FOREIGN TABLE ing.kv ENABLE ALWAYS TRIGGER a_stmt;
ALTER FOREIGN TABLE ing.kv ENABLE REPLICA TRIGGER a_of_v;
RESET ROLE;
INSERT INTO kv VALUES (2, 'by a person');
TRUNCATE fired;
SELECT test_write('kv', 'kafka', 'upsert',
  ARRAY[ROW(1, 'a'), ROW(2, 'b'), ROW(1, 'a2'), ROW(3, 'skip'), ROW(2, 'upper'), ROW(4, 'keep')]::kv[]);
SELECT * FROM kv ORDER BY k;
SELECT event, who, k, v, marked FROM fired ORDER BY n;
TRUNCATE fired;
-- tombstones: a key with a row, a key without, a row the trigger keeps
SELECT test_write('kv', 'kafka', 'tombstone', ARRAY[ROW(1, NULL), ROW(5, NULL), ROW(4, NULL)]::kv[]);
SELECT * FROM kv ORDER BY k;
SELECT event, who, k, v FROM fired ORDER BY n;
TRUNCATE fired;
-- a BEFORE trigger may not change the key of an ingested row: its key's
-- tombstone must find it
SET ROLE ing_owner;
CREATE FUNCTION ing.rekey() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.k := NEW.k + 100;
  RETURN NEW;
END $$;
CREATE TRIGGER c_rekey BEFORE INSERT OR UPDATE ON ing.kv FOR EACH ROW EXECUTE FUNCTION ing.rekey();
ALTER FOREIGN TABLE ing.kv ENABLE ALWAYS TRIGGER c_rekey;
RESET ROLE;
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(7, 'new key')]::kv[]);
\echo :LAST_ERROR_SQLSTATE
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(2, 'old key')]::kv[]);
DROP TRIGGER c_rekey ON kv;
SELECT * FROM kv ORDER BY k;
-- the log never goes below zero
SELECT diff, origin, role, (data).k, (data).v FROM source_writes.updates(NULL::kv)
ORDER BY ts, diff DESC, (data).k;
TRUNCATE fired;

--
-- A BEFORE row trigger that changes or deletes the key's current row itself
-- (a statement of its own on the table): the overwrite or the tombstone
-- fails with PostgreSQL's error (27000), as INSERT ... ON CONFLICT DO UPDATE
-- and DELETE do on the plain table beside it, and writes nothing
--
SET ROLE ing_owner;
CREATE FOREIGN TABLE ing.touched (k int, v text) SERVER ing_kafka
  OPTIONS (topic 'touched', envelope 'upsert', key 'k');
CREATE TABLE ing.touched_plain (k int PRIMARY KEY, v text);
CREATE FUNCTION ing.touch_own_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() > 1 THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP = 'DELETE' THEN
    EXECUTE format('DELETE FROM %s WHERE k = $1', TG_RELID::regclass) USING OLD.k;
    RETURN OLD;
  END IF;
  EXECUTE format('UPDATE %s SET v = ''touched'' WHERE k = $1', TG_RELID::regclass) USING NEW.k;
  RETURN NEW;
END $$;
CREATE TRIGGER touch BEFORE UPDATE OR DELETE ON ing.touched
  FOR EACH ROW EXECUTE FUNCTION ing.touch_own_row();
ALTER FOREIGN TABLE ing.touched ENABLE ALWAYS TRIGGER touch;
CREATE TRIGGER touch BEFORE UPDATE OR DELETE ON ing.touched_plain
  FOR EACH ROW EXECUTE FUNCTION ing.touch_own_row();
RESET ROLE;
SELECT test_write('touched', 'kafka', 'upsert', ARRAY[ROW(1, 'first')]::touched[]);
INSERT INTO touched_plain VALUES (1, 'first');
SELECT test_write('touched', 'kafka', 'upsert', ARRAY[ROW(1, 'second')]::touched[]);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO touched_plain VALUES (1, 'second') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
\echo :LAST_ERROR_SQLSTATE
SELECT test_write('touched', 'kafka', 'tombstone', ARRAY[ROW(1, NULL)]::touched[]);
\echo :LAST_ERROR_SQLSTATE
DELETE FROM touched_plain WHERE k = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM touched;
SELECT * FROM touched_plain;
SELECT diff, origin, (data).k, (data).v FROM source_writes.updates(NULL::touched);

--
-- A source that is a partition: ingested rows keep to its bounds, with
-- PostgreSQL's error, as a person's INSERT does
--
CREATE TABLE parted (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100);
CREATE FOREIGN TABLE parted_src PARTITION OF parted FOR VALUES FROM (100) TO (200)
  SERVER ing_kafka OPTIONS (topic 'parted');
INSERT INTO parted_src VALUES (999, 'person');
SELECT test_write('parted_src', 'kafka', 'append', ARRAY[ROW(999, 'kafka')]::parted_src[]);
\echo :LAST_ERROR_SQLSTATE
SELECT test_write('parted_src', 'webhook', 'append', ARRAY[ROW(NULL, 'webhook')]::parted_src[]);
SELECT test_write('parted_src', 'kafka', 'append', ARRAY[ROW(150, 'kafka')]::parted_src[]);
SELECT * FROM parted WHERE id = 150;
SELECT tableoid::regclass, * FROM parted ORDER BY id;

--
-- retry_errors(): the table's code runs as the owner, the log names the
-- role that called it; an error that a trigger raises of classes 22 and
-- 23 is the message's (kept, with the reason), others fail the call
--
CREATE ROLE ing_retrier;
GRANT USAGE ON SCHEMA ing TO ing_retrier;
GRANT SELECT, INSERT, DELETE ON ing.kv TO ing_retrier;
SET ROLE ing_owner;
CREATE FUNCTION ing.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v = 'no' THEN
    RAISE EXCEPTION 'refused by the trigger' USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.v = 'fail' THEN
    RAISE EXCEPTION 'the trigger failed';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER d_refuse BEFORE INSERT OR UPDATE ON ing.kv FOR EACH ROW EXECUTE FUNCTION ing.refuse();
ALTER FOREIGN TABLE ing.kv ENABLE ALWAYS TRIGGER d_refuse;
RESET ROLE;
INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error)
VALUES ('kv', 0, 0, 10, '10', '{"k": 10, "v": "retried"}', 'old reason'),
       ('kv', 0, 0, 11, '11', '{"k": 11, "v": "no"}', 'old reason');
SET ROLE ing_retrier;
SELECT source_writes.retry_errors('kv');
RESET ROLE;
SELECT "offset", error FROM source_writes.errors WHERE source = 'kv'::regclass ORDER BY 1;
SELECT event, who, k, v FROM fired ORDER BY n;
SELECT origin, role, (data).k, (data).v FROM source_writes.updates(NULL::kv)
WHERE (data).k = 10;
INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error)
VALUES ('kv', 0, 0, 12, '12', '{"k": 12, "v": "fail"}', 'old reason');
SET ROLE ing_retrier;
SELECT source_writes.retry_errors('kv');
RESET ROLE;
SELECT "offset", error FROM source_writes.errors WHERE source = 'kv'::regclass ORDER BY 1;
SELECT count(*) FROM kv WHERE k IN (11, 12);

DROP SERVER ing_kafka CASCADE;
DROP TABLE parted;
DROP SCHEMA ing CASCADE;
DROP ROLE ing_retrier;
DROP ROLE ing_owner;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
RESET search_path;
