--
-- Tombstones that find no row: a stream's tombstone for a key that has no
-- current row (a person deleted it or moved it to another key, or it never
-- existed) leaves a no-op row in the history, added and retracted by its
-- own batch, with the message's provenance: a trace that no reader shows,
-- that a version without edits counts as the stream's write of the key,
-- and that export() and versions carry.  Messages come in through
-- retry_errors(), as in sql/retain_raw.sql, and through the test door.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SCHEMA tomb;
SET search_path = tomb, public;

-- kept errors of a Kafka source, to be ingested by retry_errors()
CREATE FUNCTION tomb.keep(t regclass, off bigint, key text, value text)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error,
                                    "timestamp")
  VALUES (t, 0, 0, off, convert_to(key, 'UTF8'), convert_to(value, 'UTF8'),
          'kept by the test', 1700000000000 + off)
$$;

-- timestamps as ranks among the batches of a table (NULL stays NULL)
CREATE FUNCTION tomb.tx(src regclass, ts bigint) RETURNS bigint LANGUAGE sql AS $$
  SELECT nullif(count(*), 0) FROM source_writes.batches b
  WHERE b.source = src AND b.ts <= tx.ts
$$;

-- the rows of a source's history heap, as stored: its no-op rows are
-- those whose "$batch" is their "$retracted"
CREATE FUNCTION tomb.stored_history(t regclass)
RETURNS TABLE (k text, v text, part int, pos bigint, key text, value text,
               noop boolean, batch bigint)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'SELECT k, v, "$part", "$pos", convert_from("$key", ''UTF8''),
            convert_from("$value", ''UTF8''), "$batch" = "$retracted",
            tomb.tx(%L::regclass, b.ts)
     FROM %s h LEFT JOIN source_writes.batches b ON b.source = %L::regclass AND b.batch = h."$batch"
     ORDER BY 8, 1, 3',
    t, (SELECT history_rel::regclass FROM source_writes.source_tables WHERE relid = t), t);
END
$$;

-- how many rows a source's history heap has, and of them no-op rows
CREATE FUNCTION tomb.history_rows(t regclass, OUT noop bigint, OUT rows bigint)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('SELECT count(*) FILTER (WHERE "$batch" = "$retracted"), count(*) FROM %s',
                 (SELECT history_rel::regclass FROM source_writes.source_tables WHERE relid = t))
    INTO noop, rows;
END
$$;

CREATE FOREIGN TABLE tomb.kv (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', retain_raw 'true');

-- the stream writes a, b and c (batch 1); a person deletes a and moves b
-- to bb (batches 2 and 3); then the stream's tombstones of a and b find
-- no row, and so does one of z, a key that never was (batch 4)
SELECT keep('kv', 0, 'a', '{"v": "a1"}'), keep('kv', 1, 'b', '{"v": "b1"}'),
       keep('kv', 2, 'c', '{"v": "c1"}');
SELECT source_writes.retry_errors('kv') AS moved;
DELETE FROM kv WHERE k = 'a';
UPDATE kv SET k = 'bb' WHERE k = 'b';
SELECT keep('kv', 3, 'a', NULL), keep('kv', 4, 'b', NULL), keep('kv', 5, 'z', NULL);
SELECT source_writes.retry_errors('kv') AS moved;
SELECT * FROM kv ORDER BY k;
SELECT count(*) FROM kv;

-- the trace: three no-op rows of batch 4, each with its key only, its
-- message's offset and the message as it came (a key, no value)
SELECT * FROM stored_history('kv');

-- no reader shows them
SELECT tx('kv', ts) AS tx, diff, origin, data
FROM source_writes.updates(NULL::kv) ORDER BY 1, 2, (data).k;
SELECT tx('kv', valid_from) AS v_from, tx('kv', valid_to) AS v_to, origin,
       retracted_origin, "offset", data
FROM source_writes.history(NULL::kv) ORDER BY 1, (data).k;
SELECT tx('kv', ts) AS tx, origin, "offset", data
FROM source_writes.blame(NULL::kv) ORDER BY (data).k;
SELECT "offset", convert_from(key, 'UTF8') AS key, value, valid_to IS NULL AS current, data
FROM source_writes.raw_messages(NULL::kv) ORDER BY "offset";
SELECT ts AS ts3 FROM source_writes.batches WHERE source = 'kv'::regclass
ORDER BY ts OFFSET 2 LIMIT 1 \gset
SELECT ts AS ts4 FROM source_writes.batches WHERE source = 'kv'::regclass
ORDER BY ts OFFSET 3 LIMIT 1 \gset
SELECT change, origin, data FROM source_writes.diff(NULL::kv, :ts3, :ts4);
SELECT count(*) AS changes_from_3 FROM source_writes.updates(NULL::kv, :ts3);
SET source_writes.as_of = :ts3;
SELECT * FROM kv ORDER BY k;
SET source_writes.as_of = :ts4;
SELECT * FROM kv ORDER BY k;
SELECT count(*) FROM kv;
RESET source_writes.as_of;

-- a version without edits: the stream's rows of a and b are retracted by
-- the tombstones, as a table that read the topic afresh has neither; the
-- no-op rows come along, so that a version of it knows too
CREATE FOREIGN TABLE tomb.kv_raw (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv', carry_edits 'false',
           retain_raw 'true');
SELECT * FROM kv_raw ORDER BY k;
SELECT tx('kv_raw', valid_from) AS v_from, tx('kv_raw', valid_to) AS v_to, origin,
       retracted_origin, data
FROM source_writes.history(NULL::kv_raw) ORDER BY 1, (data).k;
SELECT * FROM stored_history('kv_raw');
-- with the edits, then without them from that version: the same
CREATE FOREIGN TABLE tomb.kv_all (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv');
CREATE FOREIGN TABLE tomb.kv_all_raw (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv_all', carry_edits 'false');
SELECT * FROM kv_all ORDER BY k;
SELECT * FROM kv_all_raw ORDER BY k;
SELECT * FROM history_rows('kv_all_raw');

-- export() writes them, import() takes them, and a version of the
-- imported table knows
CREATE TABLE tomb.lines AS SELECT e AS line FROM source_writes.export('kv') e;
SELECT count(*) AS rows_exported FROM lines, jsonb_array_elements(line::jsonb) e
WHERE left(line, 1) = '[' AND e->>0 = e->>1;
CREATE FOREIGN TABLE tomb.kv_moved (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
SELECT source_writes.import('kv_moved', 'tomb.lines') AS imported;
SELECT (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::kv))
     = (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::kv_moved)) AS same_log;
SELECT * FROM history_rows('kv_moved');
CREATE FOREIGN TABLE tomb.kv_moved_raw (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv_moved', carry_edits 'false');
SELECT * FROM kv_moved_raw ORDER BY k;

-- a key that the same transaction added and then tombstoned leaves no
-- history of its row, but a no-op row all the same; and the readers of
-- that transaction do not show it either
BEGIN;
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW('t', 't1')]::kv[]);
SELECT test_write('kv', 'kafka', 'tombstone', ARRAY[ROW('t', NULL)]::kv[], 0, 7);
SELECT count(*) AS own FROM source_writes.history(NULL::kv) WHERE (data).k = 't';
SELECT count(*) AS own FROM source_writes.blame(NULL::kv) WHERE (data).k = 't';
SELECT count(*) AS own FROM source_writes.updates(NULL::kv) WHERE (data).k = 't';
COMMIT;
SELECT k, v, part, pos, noop FROM stored_history('kv') WHERE k = 't';
SELECT count(*) AS t_changes FROM source_writes.updates(NULL::kv) WHERE (data).k = 't';

-- a Debezium delete of a key that has no row: a no-op row, shown nowhere
CREATE FOREIGN TABLE tomb.dbz (id int, v text) SERVER kafka
  OPTIONS (topic 'dbz', envelope 'debezium', key 'id', retain_raw 'true');
SELECT keep('dbz', 0, '{"id": 1}',
            '{"op":"c","before":null,"after":{"id":1,"v":"a"},"source":{},"ts_ms":1}'),
       keep('dbz', 1, '{"id": 2}',
            '{"op":"d","before":{"id":2,"v":"b"},"after":null,"source":{},"ts_ms":2}');
SELECT source_writes.retry_errors('dbz') AS moved;
SELECT * FROM dbz;
SELECT count(*) AS log FROM source_writes.updates(NULL::dbz);
SELECT count(*) AS history FROM source_writes.history(NULL::dbz);
SELECT "offset", data FROM source_writes.raw_messages(NULL::dbz);
SELECT * FROM history_rows('dbz');

-- a person's delete and the stream's messages of the key in one
-- transaction (retry_errors() ingests in the caller's), whose batches
-- have one timestamp: the stream's writes come after the delete (before
-- it they would have retracted the row themselves), so a version without
-- edits retracts the stream's rows by them: a's by its tombstone, which
-- found no row, b's by its new row, the one row of b
CREATE FOREIGN TABLE tomb.one (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'one', envelope 'upsert', key 'k');
SELECT keep('one', 0, 'a', '{"v": "a1"}'), keep('one', 1, 'b', '{"v": "b1"}');
SELECT source_writes.retry_errors('one') AS moved;
BEGIN;
DELETE FROM one;
SELECT keep('one', 2, 'a', NULL), keep('one', 3, 'b', '{"v": "b2"}');
SELECT source_writes.retry_errors('one') AS moved;
COMMIT;
SELECT * FROM one ORDER BY k;
SELECT origin, tx('one', ts) AS tx FROM source_writes.batches
WHERE source = 'one'::regclass ORDER BY ts, origin;
CREATE FOREIGN TABLE tomb.one_raw (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'one', envelope 'upsert', key 'k', version_of 'one', carry_edits 'false');
SELECT * FROM one_raw ORDER BY k;
SELECT tx('one_raw', valid_from) AS v_from, tx('one_raw', valid_to) AS v_to, origin,
       retracted_origin, data
FROM source_writes.history(NULL::one_raw) ORDER BY 1, (data).k;

-- a table whose other columns refuse NULL (a NOT NULL column, a NOT NULL
-- domain, a CHECK, a generated column, a default): its no-op rows have
-- NULL there all the same, as no row of the table has, and DDL, indexes,
-- versions, export and import (into a table that keeps raw messages) take
-- them; so does import take the history rows' NULL in a column added
-- later with a NOT NULL domain, where a version keeps it too
CREATE DOMAIN tomb.word AS text NOT NULL;
CREATE FOREIGN TABLE tomb.strict (k text OPTIONS (source 'key'), w tomb.word, n int NOT NULL,
                                  c int CHECK (c > 0), g text GENERATED ALWAYS AS (k || w) STORED,
                                  d int DEFAULT 7)
  SERVER kafka OPTIONS (topic 'strict', envelope 'upsert', key 'k');
SELECT keep('strict', 0, 'a', '{"w": "a1", "n": 1, "c": 1}'),
       keep('strict', 1, 'b', '{"w": "b1", "n": 2, "c": 2}');
SELECT source_writes.retry_errors('strict') AS moved;
DELETE FROM strict WHERE k = 'a';
SELECT keep('strict', 2, 'a', NULL), keep('strict', 3, 'z', NULL);
SELECT source_writes.retry_errors('strict') AS moved;
SELECT * FROM history_rows('strict');
ALTER FOREIGN TABLE strict ALTER COLUMN n TYPE bigint, ADD COLUMN e tomb.word DEFAULT 'e';
CREATE UNIQUE INDEX strict_w ON strict (w);
SELECT * FROM strict;
CREATE FOREIGN TABLE tomb.strict_raw (k text OPTIONS (source 'key'), w tomb.word,
                                      n bigint NOT NULL, c int CHECK (c > 0),
                                      g text GENERATED ALWAYS AS (k || w) STORED, d int DEFAULT 7,
                                      e tomb.word DEFAULT 'e')
  SERVER kafka OPTIONS (topic 'strict', envelope 'upsert', key 'k', version_of 'strict',
                        carry_edits 'false');
-- without edits, the values ADD COLUMN filled in stay behind: b's row is
-- the stream's from before it, current again with NULL in e, which e's
-- domain refuses, so it is an error of the version; a's row, in the
-- history, keeps its NULL there
SELECT * FROM strict_raw;
SELECT partition, "offset", error FROM source_writes.errors
WHERE source = 'strict_raw'::regclass;
SELECT valid_to IS NULL AS current, data FROM source_writes.history(NULL::strict_raw)
ORDER BY valid_from, (data).k;
SELECT * FROM history_rows('strict_raw');
-- with edits, they come along
CREATE FOREIGN TABLE tomb.strict_all (k text OPTIONS (source 'key'), w tomb.word,
                                      n bigint NOT NULL, c int CHECK (c > 0),
                                      g text GENERATED ALWAYS AS (k || w) STORED, d int DEFAULT 7,
                                      e tomb.word DEFAULT 'e')
  SERVER kafka OPTIONS (topic 'strict', envelope 'upsert', key 'k', version_of 'strict');
SELECT * FROM strict_all;
SELECT count(*) AS errors FROM source_writes.errors WHERE source = 'strict_all'::regclass;
-- before since, without edits: what ADD COLUMN rewrote counts as the
-- stream's (by its position, as a folded batch's rows do), and the rows it
-- replaced are of no readable time, whether compaction has deleted them
-- yet or not: each key once, with the value ADD COLUMN filled in
CREATE FOREIGN TABLE tomb.late (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'late', envelope 'upsert', key 'k');
SELECT keep('late', 0, 'a', '{"v": "a1"}'), keep('late', 1, 'b', '{"v": "b1"}');
SELECT source_writes.retry_errors('late') AS moved;
ALTER FOREIGN TABLE late ADD COLUMN e text DEFAULT 'e';
ALTER FOREIGN TABLE late OPTIONS (ADD retain_history '0');
SELECT since = upper AS since_past_the_ddl FROM source_writes.frontiers('late');
SELECT * FROM history_rows('late');
CREATE FOREIGN TABLE tomb.late_raw (k text OPTIONS (source 'key'), v text, e text) SERVER kafka
  OPTIONS (topic 'late', envelope 'upsert', key 'k', version_of 'late', carry_edits 'false');
SELECT * FROM late_raw ORDER BY k;
SELECT source_writes.compact('late');
SELECT * FROM history_rows('late');
CREATE FOREIGN TABLE tomb.late_raw2 (k text OPTIONS (source 'key'), v text, e text) SERVER kafka
  OPTIONS (topic 'late', envelope 'upsert', key 'k', version_of 'late', carry_edits 'false');
SELECT * FROM late_raw2 ORDER BY k;
-- dated as in the old table: at its oldest batch (the DDL's, which stays
-- behind, so the version has a batch of the system at its time), before
-- since
SELECT (SELECT array_agg(DISTINCT valid_from) FROM source_writes.history(NULL::late_raw2))
       = (SELECT array_agg(DISTINCT valid_from) FROM source_writes.history(NULL::late))
       AS same_valid_from,
       (SELECT max(valid_from) FROM source_writes.history(NULL::late_raw2))
       < (SELECT since FROM source_writes.frontiers('late_raw2')) AS before_since,
       (SELECT count(*) FROM source_writes.updates(NULL::late_raw2)) AS updates;
SELECT origin FROM source_writes.batches WHERE source = 'late_raw2'::regclass;
-- a's row that ADD COLUMN rewrote, a person deletes after since, and the
-- stream writes a again: every pass of the version counts that row as
-- the stream's, so the stream's write retracts it (a is there once)
CREATE TEMP TABLE late_since AS SELECT since FROM source_writes.frontiers('late');
ALTER FOREIGN TABLE late OPTIONS (SET retain_history '1 h');
DELETE FROM late WHERE k = 'a';
SELECT keep('late', 2, 'a', '{"v": "a2"}');
SELECT source_writes.retry_errors('late') AS moved;
SELECT f.since = l.since AS since_kept FROM source_writes.frontiers('late') f, late_since l;
CREATE FOREIGN TABLE tomb.late_raw3 (k text OPTIONS (source 'key'), v text, e text) SERVER kafka
  OPTIONS (topic 'late', envelope 'upsert', key 'k', version_of 'late', carry_edits 'false');
SELECT * FROM late_raw3 ORDER BY k;
DROP FOREIGN TABLE late, late_raw, late_raw2, late_raw3;
-- a version whose column is cast into a domain that takes no NULL: the
-- history row from before ADD COLUMN keeps its NULL there, as the old
-- table's history does (only a current row must pass the domain)
CREATE FOREIGN TABLE tomb.recast (k text OPTIONS (source 'key'), v text) SERVER kafka
  OPTIONS (topic 'recast', envelope 'upsert', key 'k');
SELECT keep('recast', 0, 'a', '{"v": "a1"}');
SELECT source_writes.retry_errors('recast') AS moved;
ALTER FOREIGN TABLE recast ADD COLUMN e text DEFAULT 'e';
CREATE FOREIGN TABLE tomb.recast_v2 (k text OPTIONS (source 'key'), v text, e tomb.word)
  SERVER kafka OPTIONS (topic 'recast', envelope 'upsert', key 'k', version_of 'recast');
SELECT valid_to IS NULL AS current, data FROM source_writes.history(NULL::recast) ORDER BY valid_from;
SELECT valid_to IS NULL AS current, data FROM source_writes.history(NULL::recast_v2) ORDER BY valid_from;
DROP FOREIGN TABLE recast, recast_v2;
DROP TABLE late_since;
-- a row current again without edits holds values it held in the old
-- table: a CHECK that ALTER DOMAIN added NOT VALID leaves them alone, as
-- it leaves a plain table's (INSERT ... SELECT copies them), and one
-- validated, which checked only the current rows, refuses them (here on
-- the domain that the column's domain is over)
CREATE DOMAIN tomb.dw AS text;
CREATE DOMAIN tomb.dw2 AS tomb.dw;
CREATE FOREIGN TABLE tomb.dv (k text OPTIONS (source 'key'), w tomb.dw2, n int) SERVER kafka
  OPTIONS (topic 'dv', envelope 'upsert', key 'k');
SELECT keep('dv', 0, 'a', '{"w": "bad", "n": 1}'), keep('dv', 1, 'b', '{"w": "bad", "n": 1}'),
       keep('dv', 2, 'c', '{"w": "worse", "n": 1}');
SELECT source_writes.retry_errors('dv') AS moved;
ALTER DOMAIN tomb.dw ADD CONSTRAINT no_bad CHECK (VALUE <> 'bad') NOT VALID;
UPDATE dv SET n = 2 WHERE k = 'a';
UPDATE dv SET w = 'good' WHERE k = 'c';
ALTER DOMAIN tomb.dw ADD CONSTRAINT no_worse CHECK (VALUE <> 'worse');
CREATE FOREIGN TABLE tomb.dv_raw (k text OPTIONS (source 'key'), w tomb.dw2, n int) SERVER kafka
  OPTIONS (topic 'dv', envelope 'upsert', key 'k', version_of 'dv', carry_edits 'false');
SELECT * FROM dv_raw ORDER BY k;
SELECT "offset", error FROM source_writes.errors WHERE source = 'dv_raw'::regclass;
DROP FOREIGN TABLE dv, dv_raw;
DROP DOMAIN tomb.dw2, tomb.dw;
TRUNCATE lines;
INSERT INTO lines SELECT e FROM source_writes.export('strict') e;
CREATE FOREIGN TABLE tomb.strict_moved (k text OPTIONS (source 'key'), w tomb.word,
                                        n bigint NOT NULL, c int CHECK (c > 0),
                                        g text GENERATED ALWAYS AS (k || w) STORED, d int DEFAULT 7,
                                        e tomb.word DEFAULT 'e')
  SERVER kafka OPTIONS (topic 'strict', envelope 'upsert', key 'k', retain_raw 'true');
SELECT source_writes.import('strict_moved', 'tomb.lines') AS imported;
SELECT * FROM strict_moved;
SELECT * FROM history_rows('strict_moved');
SELECT (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::strict))
     = (SELECT string_agg(ts || ' ' || diff || ' ' || data::text, ',' ORDER BY ts, diff, data::text)
        FROM source_writes.updates(NULL::strict_moved)) AS same_log;
SELECT valid_to IS NULL AS current, data FROM source_writes.history(NULL::strict_moved)
ORDER BY valid_from, (data).k;

-- compaction deletes them once they are before since, as any retracted row
ALTER FOREIGN TABLE kv OPTIONS (ADD retain_history '0');
SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW('c', 'c2')]::kv[], 0, 8);
SELECT source_writes.compact('kv') AS removed;
SELECT * FROM history_rows('kv');
SELECT * FROM kv ORDER BY k;

DROP SCHEMA tomb CASCADE;
DROP SERVER kafka CASCADE;
RESET search_path;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
