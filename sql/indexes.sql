--
-- Indexes on source tables.  CREATE INDEX, DROP INDEX, ALTER INDEX,
-- COMMENT ON INDEX and REINDEX take a source table as they take a plain
-- table: the index is built on the source's current rows (its hidden heap)
-- and is named in the table's schema.  Each statement runs on a plain table
-- beside the source, with the same outcome.
--
CREATE SCHEMA idx;
SET search_path = idx, public;
CREATE SERVER idx_hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
CREATE SERVER idx_kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE src (id int, name text, doc jsonb, at timestamptz, pt point, body text)
  SERVER idx_hooks;
CREATE TABLE pl (id int, name text, doc jsonb, at timestamptz, pt point, body text);
INSERT INTO src
  SELECT g, 'n' || g, jsonb_build_object('g', g % 10),
         '2026-01-01 00:00+00'::timestamptz + g * interval '1 minute',
         point(g, g), 'body ' || g
  FROM generate_series(1, 200) g;
INSERT INTO pl SELECT * FROM src;

-- the indexes of both tables, with the table's name made the same
CREATE FUNCTION side_by_side()
RETURNS TABLE (indexdef text, on_source boolean, on_plain boolean)
LANGUAGE sql AS $$
  SELECT coalesce(s.d, p.d), s.d IS NOT NULL, p.d IS NOT NULL
  FROM (SELECT regexp_replace(i.indexdef, '\msrc(_|\M)', 'T\1', 'g') AS d
        FROM source_writes.indexes i WHERE i.tablename = 'src') s
  FULL JOIN (SELECT regexp_replace(i.indexdef, '\mpl(_|\M)', 'T\1', 'g') AS d
             FROM pg_indexes i WHERE i.tablename = 'pl') p USING (d)
  ORDER BY 1
$$;

-- Which indexes a query on the hidden heap of a source uses when it must
-- use one (the planner of source tables is another matter), and how many
-- rows it finds through them.
CREATE FUNCTION through_index(src regclass, cond text,
                              OUT indexes text, OUT rows_found bigint)
LANGUAGE plpgsql AS $$
DECLARE
  heap regclass := (SELECT current_rel FROM source_writes.source_tables WHERE relid = src);
  line text;
BEGIN
  SET LOCAL enable_seqscan = off;
  FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT * FROM %s WHERE %s', heap, cond) LOOP
    IF line ~ 'Index (Only )?Scan (Backward )?(using|on) ' THEN
      indexes := concat_ws(', ', indexes,
                           substring(line from 'Index (?:Only )?Scan (?:Backward )?(?:using|on) (\S+)'));
    END IF;
  END LOOP;
  EXECUTE format('SELECT count(*) FROM %s WHERE %s', heap, cond) INTO rows_found;
END
$$;

-- what the event triggers see of a CREATE INDEX
CREATE FUNCTION idx_say() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    RAISE NOTICE '% %: % %', tg_event, c.command_tag, c.object_type, c.object_identity;
  END LOOP;
END
$$;
CREATE EVENT TRIGGER idx_say ON ddl_command_end WHEN TAG IN ('CREATE INDEX')
  EXECUTE FUNCTION idx_say();
CREATE INDEX ON src (id);
CREATE INDEX ON pl (id);
DROP EVENT TRIGGER idx_say;

-- every form: access methods, unique, expressions, partial, INCLUDE,
-- opclasses, collations, orderings, storage parameters, tablespace
CREATE UNIQUE INDEX ON src (name);
CREATE UNIQUE INDEX ON pl (name);
CREATE INDEX ON src USING hash (name);
CREATE INDEX ON pl USING hash (name);
CREATE INDEX ON src USING gin (doc jsonb_path_ops);
CREATE INDEX ON pl USING gin (doc jsonb_path_ops);
CREATE INDEX ON src USING gist (pt);
CREATE INDEX ON pl USING gist (pt);
CREATE INDEX ON src USING brin (at) WITH (pages_per_range = 16);
CREATE INDEX ON pl USING brin (at) WITH (pages_per_range = 16);
CREATE INDEX ON src (lower(name), (id + 1));
CREATE INDEX ON pl (lower(name), (id + 1));
CREATE INDEX ON src (at DESC NULLS LAST) INCLUDE (body) WHERE id > 100;
CREATE INDEX ON pl (at DESC NULLS LAST) INCLUDE (body) WHERE id > 100;
CREATE INDEX by_name ON src (name COLLATE "C" text_pattern_ops) WITH (fillfactor = 70)
  TABLESPACE pg_default;
CREATE INDEX by_name_pl ON pl (name COLLATE "C" text_pattern_ops) WITH (fillfactor = 70)
  TABLESPACE pg_default;
CREATE INDEX CONCURRENTLY ON src (id, name);
CREATE INDEX CONCURRENTLY ON pl (id, name);
SELECT * FROM side_by_side();

-- the indexes are in the table's schema, and index its hidden heap
SELECT c.relnamespace::regnamespace, x.indrelid = s.current_rel AS on_heap, count(*)
FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
JOIN source_writes.source_tables s ON s.relid = 'src'::regclass
WHERE c.relname LIKE 'src%' OR c.relname = 'by_name'
GROUP BY 1, 2;

-- names clash in the table's schema, with anything there
CREATE INDEX src_id_idx ON src (name);
CREATE INDEX pl_id_idx ON pl (name);
CREATE TABLE taken ();
CREATE INDEX taken ON src (id);
CREATE INDEX taken ON pl (id);
CREATE INDEX IF NOT EXISTS taken ON src (id);
CREATE INDEX IF NOT EXISTS taken ON pl (id);
CREATE INDEX IF NOT EXISTS src_id_idx ON src (name);
CREATE INDEX IF NOT EXISTS pl_id_idx ON pl (name);
-- a default name steps aside
CREATE INDEX ON src (id);
CREATE INDEX ON pl (id);
DROP TABLE taken;

-- the source's own columns only: "$batch" is the heap's
CREATE INDEX ON src ("$batch");
CREATE INDEX ON pl ("$batch");
CREATE INDEX ON src (("$batch" + 1));
CREATE INDEX ON pl (("$batch" + 1));
CREATE INDEX ON src (id) WHERE "$batch" > 0;
CREATE INDEX ON pl (id) WHERE "$batch" > 0;
CREATE INDEX ON src (id) INCLUDE ("$batch");
CREATE INDEX ON pl (id) INCLUDE ("$batch");
CREATE INDEX ON src (ctid);
CREATE INDEX ON pl (ctid);
CREATE INDEX ON src (nope);
CREATE INDEX ON pl (nope);

-- rows written before and after CREATE INDEX are found through it, and
-- edits keep it right
INSERT INTO src VALUES (201, 'n201', '{"g": 1}', '2026-01-02 00:00+00', point(0, 0), 'late');
INSERT INTO pl VALUES (201, 'n201', '{"g": 1}', '2026-01-02 00:00+00', point(0, 0), 'late');
UPDATE src SET name = 'renamed' WHERE id = 7;
UPDATE pl SET name = 'renamed' WHERE id = 7;
DELETE FROM src WHERE id = 8;
DELETE FROM pl WHERE id = 8;
SELECT * FROM through_index('src', 'id = 42');
SELECT * FROM through_index('src', 'id IN (7, 8, 201)');
SELECT * FROM through_index('src', $$name = 'renamed'$$);
SELECT * FROM through_index('src', $$name = 'n7'$$);
SELECT * FROM through_index('src', $$doc @> '{"g": 1}'$$);
SELECT count(*) FROM pl WHERE doc @> '{"g": 1}';
SELECT * FROM through_index('src', $$lower(name) = 'n201'$$);
SELECT * FROM through_index('src', $$at > '2026-01-01 03:00+00' AND id > 100$$);
SELECT count(*) FROM pl WHERE at > '2026-01-01 03:00+00' AND id > 100;
SELECT * FROM through_index('src', 'pt <@ box(point(0, 0), point(10, 10))');
SELECT count(*) FROM pl WHERE pt <@ box(point(0, 0), point(10, 10));

-- a unique index refuses a duplicate with PostgreSQL's error, naming it
\set VERBOSITY verbose
INSERT INTO src VALUES (300, 'n1');
INSERT INTO pl VALUES (300, 'n1');
UPDATE src SET name = 'n2' WHERE id = 1;
UPDATE pl SET name = 'n2' WHERE id = 1;
\set VERBOSITY default
SELECT count(*) FROM src WHERE id = 300;

-- ALTER INDEX, COMMENT, REINDEX, DROP by name
ALTER INDEX src_id_idx RENAME TO src_by_id;
ALTER INDEX pl_id_idx RENAME TO pl_by_id;
ALTER INDEX src_by_id SET (fillfactor = 50);
ALTER INDEX pl_by_id SET (fillfactor = 50);
COMMENT ON INDEX src_by_id IS 'by id';
COMMENT ON INDEX pl_by_id IS 'by id';
SELECT obj_description('src_by_id'::regclass), obj_description('pl_by_id'::regclass);
REINDEX INDEX src_by_id;
REINDEX INDEX pl_by_id;
REINDEX INDEX CONCURRENTLY src_by_id;
REINDEX INDEX CONCURRENTLY pl_by_id;
REINDEX TABLE src;
REINDEX TABLE pl;
REINDEX TABLE CONCURRENTLY src;
REINDEX TABLE CONCURRENTLY pl;
REINDEX (VERBOSE off) TABLE src;
BEGIN;
REINDEX TABLE CONCURRENTLY src;
ROLLBACK;
BEGIN;
CREATE INDEX CONCURRENTLY ON src (body);
ROLLBACK;
BEGIN READ ONLY;
CREATE INDEX ON src (body);
ROLLBACK;
BEGIN READ ONLY;
CREATE INDEX ON pl (body);
ROLLBACK;
BEGIN READ ONLY;
REINDEX TABLE src;
REINDEX TABLE pl;
ROLLBACK;
SELECT obj_description('src_by_id'::regclass);
SELECT * FROM through_index('src', 'id = 42');
DROP INDEX src_id_idx1;
DROP INDEX pl_id_idx1;
DROP INDEX CONCURRENTLY src_id_name_idx;
DROP INDEX CONCURRENTLY pl_id_name_idx;
DROP INDEX IF EXISTS src_id_name_idx;
DROP INDEX IF EXISTS pl_id_name_idx;
SELECT * FROM side_by_side();

-- what needs a privilege needs a plain table's: owning the table
CREATE ROLE idx_bob;
GRANT USAGE, CREATE ON SCHEMA idx TO idx_bob;
GRANT ALL ON src, pl TO idx_bob;
SET ROLE idx_bob;
CREATE INDEX ON src (body);
CREATE INDEX ON pl (body);
DROP INDEX src_by_id;
DROP INDEX pl_by_id;
ALTER INDEX src_by_id RENAME TO mine;
ALTER INDEX pl_by_id RENAME TO mine;
REINDEX INDEX src_by_id;
REINDEX INDEX pl_by_id;
REINDEX TABLE src;
REINDEX TABLE pl;
-- a duplicate's values show to whoever may read the rows, and only to them
INSERT INTO src (id, name) VALUES (400, 'n3');
INSERT INTO pl (id, name) VALUES (400, 'n3');
RESET ROLE;
CREATE ROLE idx_carol;
GRANT USAGE ON SCHEMA idx TO idx_carol;
GRANT INSERT ON src, pl TO idx_carol;
SET ROLE idx_carol;
INSERT INTO src (id, name) VALUES (400, 'n3');
INSERT INTO pl (id, name) VALUES (400, 'n3');
RESET ROLE;
DROP OWNED BY idx_carol;
DROP ROLE idx_carol;
-- and CREATE on the table's schema; the indexes follow the table's owner
REVOKE CREATE ON SCHEMA idx FROM idx_bob;
ALTER FOREIGN TABLE src OWNER TO idx_bob;
ALTER TABLE pl OWNER TO idx_bob;
SET ROLE idx_bob;
CREATE INDEX ON src (body);
CREATE INDEX ON pl (body);
REINDEX TABLE src;
REINDEX TABLE pl;
RESET ROLE;
SELECT DISTINCT c.relowner::regrole
FROM source_writes.indexes i JOIN pg_class c ON c.relname = i.indexname
WHERE i.tablename = 'src';
ALTER FOREIGN TABLE src OWNER TO CURRENT_USER;
ALTER TABLE pl OWNER TO CURRENT_USER;

-- ALTER ... TYPE rebuilds the indexes on the column, in the table's schema,
-- with their names and comments
ALTER FOREIGN TABLE src ALTER COLUMN id TYPE bigint;
ALTER TABLE pl ALTER COLUMN id TYPE bigint;
SELECT * FROM side_by_side();
SELECT obj_description('src_by_id'::regclass);
SELECT * FROM through_index('src', 'id = 42');
-- columns added later sit elsewhere in the heap: names still match
ALTER FOREIGN TABLE src DROP COLUMN body, ADD COLUMN extra int DEFAULT 5;
ALTER TABLE pl DROP COLUMN body, ADD COLUMN extra int DEFAULT 5;
CREATE INDEX ON src (extra, (extra * 2)) WHERE extra > 0;
CREATE INDEX ON pl (extra, (extra * 2)) WHERE extra > 0;
SELECT * FROM through_index('src', 'extra = 5 AND extra * 2 = 10');

-- SET SCHEMA takes the indexes along, or fails on a name taken there
CREATE SCHEMA idx2;
CREATE TABLE idx2.src_by_id ();
CREATE TABLE idx2.pl_by_id ();
ALTER FOREIGN TABLE src SET SCHEMA idx2;
ALTER TABLE pl SET SCHEMA idx2;
DROP TABLE idx2.src_by_id, idx2.pl_by_id;
ALTER FOREIGN TABLE src SET SCHEMA idx2;
ALTER TABLE pl SET SCHEMA idx2;
SELECT c.relnamespace::regnamespace, count(*)
FROM source_writes.indexes i JOIN pg_class c ON c.relname = i.indexname
WHERE i.tablename = 'src' GROUP BY 1;
SELECT schemaname, count(*) FROM pg_indexes WHERE tablename = 'pl' GROUP BY 1;

-- VACUUM FULL of the hidden heap keeps them
SELECT current_rel AS heap FROM source_writes.source_tables
WHERE relid = 'idx2.src'::regclass \gset
VACUUM FULL :heap;
SELECT * FROM through_index('idx2.src', 'id = 42');
SELECT count(*) FROM source_writes.indexes WHERE tablename = 'src';

-- an upsert source: its key index is listed too, and stays its own; a
-- unique index of the user's and the key each refuse their duplicates
CREATE FOREIGN TABLE idx2.up (k int, v text) SERVER idx_kafka
  OPTIONS (topic 'up', envelope 'upsert', key 'k');
INSERT INTO idx2.up VALUES (1, 'a'), (2, 'b');
CREATE UNIQUE INDEX up_v ON idx2.up (v);
INSERT INTO idx2.up VALUES (3, 'a');
INSERT INTO idx2.up VALUES (1, 'c');
-- ingestion's upsert of a new key meets the user's unique index: the same
-- error, said of the source table, not of its hidden heap
CREATE FUNCTION idx_test_write(source regclass, origin text, op text, rows anyarray,
                               part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
\set VERBOSITY verbose
SELECT idx_test_write('idx2.up', 'kafka', 'upsert', ARRAY[ROW(4, 'b')]::idx2.up[]);
\set VERBOSITY default
SELECT schemaname, tablename, indexname ~ '^current_\d+_[0-9a-f]+_key$' AS is_key,
       regexp_replace(indexdef, 'current_\d+_[0-9a-f]+_key', 'KEY') AS indexdef
FROM source_writes.indexes WHERE tablename = 'up' ORDER BY 3, 4;
REINDEX TABLE CONCURRENTLY idx2.up;
-- CLUSTER of the hidden heap (on the key index: CLUSTER looks for the
-- index in the heap's schema) keeps them
SELECT current_rel AS heap, indexname AS key FROM source_writes.source_tables,
       source_writes.indexes
WHERE relid = 'idx2.up'::regclass AND tablename = 'up' AND indexname <> 'up_v' \gset
CLUSTER :heap USING :key;
SELECT * FROM through_index('idx2.up', $$v = 'b'$$);
SELECT count(*) FROM source_writes.indexes WHERE tablename = 'up';
SET ROLE idx_bob;
SELECT count(*) FROM source_writes.indexes WHERE tablename = 'up';
RESET ROLE;

-- what the docs say an index does not give a source table: INSERT ... ON
-- CONFLICT, FETCH BACKWARD without SCROLL, REINDEX SCHEMA (which passes
-- over it; REINDEX TABLE takes it)
INSERT INTO idx2.up VALUES (9, 'b') ON CONFLICT DO NOTHING;
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
DECLARE c CURSOR FOR SELECT v FROM idx2.up WHERE v >= 'a' ORDER BY v;
FETCH 2 FROM c;
FETCH BACKWARD 1 FROM c;
ROLLBACK;
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
DECLARE c SCROLL CURSOR FOR SELECT v FROM idx2.up WHERE v >= 'a' ORDER BY v;
FETCH 2 FROM c;
FETCH BACKWARD 1 FROM c;
ROLLBACK;
SELECT relfilenode AS up_v_file FROM pg_class WHERE oid = 'idx2.up_v'::regclass \gset
REINDEX SCHEMA idx2;
SELECT relfilenode = :up_v_file AS passed_over FROM pg_class WHERE oid = 'idx2.up_v'::regclass;
REINDEX TABLE idx2.up;
SELECT relfilenode = :up_v_file AS passed_over FROM pg_class WHERE oid = 'idx2.up_v'::regclass;

-- DROP of the table drops its indexes
DROP FOREIGN TABLE idx2.src, idx2.up;
DROP TABLE idx2.pl;
SELECT count(*) FROM pg_class WHERE relname ~ '^(src|pl|up)_|^by_name';

DROP FUNCTION side_by_side(), through_index(regclass, text), idx_say(),
  idx_test_write(regclass, text, text, anyarray, int, bigint);
DROP SCHEMA idx, idx2;
DROP SERVER idx_hooks, idx_kafka;
DROP ROLE idx_bob;
RESET search_path;
