--
-- Every writer of a source table keeps its indexes right: a person's
-- INSERT, UPDATE, DELETE, COPY and TRUNCATE, ingestion (appends, upserts
-- and tombstones, through the workers' writer: the test door), upsert
-- merges by key, retry_errors(), ALTER ... TYPE, ADD COLUMN, VACUUM FULL
-- of the hidden heap and CLUSTER.  After each, every index of the source
-- (a unique btree, a plain btree, an expression index and a GIN index)
-- finds, when the planner must use it, the rows that a full scan finds,
-- amcheck finds each btree clean with every heap row in it, and the rows
-- are those of a plain table beside it with the same indexes, written
-- the same way.  A unique index keeps its promise: a person's duplicate
-- is PostgreSQL's 23505 said of the source table, and an ingested one is
-- kept in source_writes.errors until the conflicting row is fixed.
--
CREATE EXTENSION amcheck;
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
CREATE SCHEMA iw;
SET search_path = iw, public;
CREATE SERVER iw_kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE s (id int, name text, kind text, doc jsonb, note text)
  SERVER iw_kafka OPTIONS (topic 's');
CREATE TABLE p (id int, name text, kind text, doc jsonb, note text);
CREATE UNIQUE INDEX s_id ON s (id);
CREATE INDEX s_name ON s (name);
CREATE INDEX s_kind ON s (lower(kind));
CREATE INDEX s_doc ON s USING gin (doc);
CREATE UNIQUE INDEX p_id ON p (id);
CREATE INDEX p_name ON p (name);
CREATE INDEX p_kind ON p (lower(kind));
CREATE INDEX p_doc ON p USING gin (doc);

-- For the source and the plain table: how many rows a full scan finds,
-- the indexes that find the same rows when the planner must use them (a
-- btree: its first column IS NOT NULL; a GIN index on jsonb: @> '{}'),
-- and the verdict: 'ok', or what is wrong (an index not used, rows it
-- misses or finds too many, amcheck's complaint, the source's rows not the
-- plain table's).  The key index of an upsert source is "the key".
CREATE FUNCTION check_indexes(src regclass, plain regclass)
RETURNS TABLE (tbl text, nrows int, through text, verdict text)
LANGUAGE plpgsql
SET enable_seqscan = on SET enable_indexscan = on SET enable_bitmapscan = on
SET enable_indexonlyscan = on
AS $$
DECLARE
  t regclass;
  heap regclass;
  i record;
  cond text;
  plan text;
  line text;
  shown text;
  all_rows text[];
  via text[];
  src_rows text[];
  problems text[];
BEGIN
  FOREACH t IN ARRAY ARRAY[src, plain] LOOP
    heap := coalesce((SELECT current_rel FROM source_writes.source_tables WHERE relid = t), t);
    problems := '{}';
    through := NULL;
    PERFORM set_config('enable_seqscan', 'on', true);
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'off', true);
    EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM %s r', t) INTO all_rows;
    FOR i IN SELECT c.relname, a.amname, pg_get_indexdef(x.indexrelid, 1, true) AS col,
                    x.indexrelid,
                    regexp_replace(c.relname, '^current_\d+_[0-9a-f]+_key$', 'the key') AS name
             FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             JOIN pg_am a ON a.oid = c.relam
             WHERE x.indrelid = heap ORDER BY 5 LOOP
      through := concat_ws(', ', through, i.name);
      cond := CASE i.amname WHEN 'gin' THEN format('(%s) @> ''{}''', i.col)
                            ELSE format('(%s) IS NOT NULL', i.col) END;
      PERFORM set_config('enable_seqscan', 'on', true);
      PERFORM set_config('enable_indexscan', 'off', true);
      PERFORM set_config('enable_bitmapscan', 'off', true);
      EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM %s r WHERE %s', t, cond)
        INTO all_rows;
      PERFORM set_config('enable_seqscan', 'off', true);
      PERFORM set_config('enable_indexscan', 'on', true);
      PERFORM set_config('enable_bitmapscan', 'on', true);
      plan := '';
      FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT r::text FROM %s r WHERE %s', t, cond) LOOP
        plan := plan || line || E'\n';
      END LOOP;
      IF plan !~ ('Index Scan(: | using | on )' || i.relname || '\M') THEN
        problems := problems || format('%s not used: %s', i.name, plan);
      END IF;
      EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM %s r WHERE %s', t, cond)
        INTO via;
      IF via IS DISTINCT FROM all_rows THEN
        problems := problems || format('%s finds %s, the heap %s', i.name, via, all_rows);
      END IF;
      IF i.amname = 'btree' THEN
        BEGIN
          PERFORM bt_index_check(i.indexrelid::regclass, true);
        EXCEPTION WHEN OTHERS THEN
          -- and what the heap holds, to tell why
          EXECUTE format('SELECT string_agg(ctid || ''='' || coalesce((%s)::text, ''null''), '' '' ORDER BY ctid) FROM %s',
                         i.col, heap) INTO line;
          problems := problems || format('amcheck on %s: %s (the heap: %s)', i.name, SQLERRM, line);
        END;
      END IF;
    END LOOP;
    PERFORM set_config('enable_seqscan', 'on', true);
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM %s r', t) INTO all_rows;
    nrows := coalesce(cardinality(all_rows), 0);
    IF t = src THEN
      src_rows := all_rows;
    ELSIF all_rows IS DISTINCT FROM src_rows THEN
      problems := problems || format('the source has %s', src_rows);
    END IF;
    tbl := t::text;
    verdict := CASE WHEN cardinality(problems) = 0 THEN 'ok'
                    ELSE array_to_string(problems, '; ') END;
    RETURN NEXT;
  END LOOP;
END $$;

-- a statement's error, as a client sees its fields
CREATE FUNCTION error_of(stmt text, OUT code text, OUT message text, OUT detail text,
                         OUT schema_name text, OUT table_name text,
                         OUT constraint_name text)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  message := 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
    detail = PG_EXCEPTION_DETAIL, schema_name = SCHEMA_NAME, table_name = TABLE_NAME,
    constraint_name = CONSTRAINT_NAME;
END $$;

--
-- A person's writes
--
INSERT INTO s VALUES
  (1, 'ann', 'Red', '{"a": 1}', NULL),
  (2, 'bob', 'red', '{"a": 2, "b": [1, 2]}', 'x'),
  (3, NULL, 'Blue', NULL, NULL),
  (4, 'cid', NULL, '{}', 'y'),
  (NULL, 'dee', 'green', '{"c": "d"}', NULL),
  (NULL, NULL, NULL, NULL, 'all null');
INSERT INTO p SELECT * FROM s;
SELECT * FROM check_indexes('s', 'p');
-- the rows written before as of now
SELECT max(ts) AS before_writes FROM source_writes.updates(NULL::s) \gset
CREATE TABLE s_then AS SELECT * FROM s;

-- UPDATE of indexed columns (a new version in every index), of an
-- unindexed column (a HOT update), of the unique key
UPDATE s SET name = 'ann2', kind = 'RED!', doc = '{"a": 10}' WHERE id = 1;
UPDATE p SET name = 'ann2', kind = 'RED!', doc = '{"a": 10}' WHERE id = 1;
UPDATE s SET note = 'noted' WHERE id IN (2, 3);
UPDATE p SET note = 'noted' WHERE id IN (2, 3);
UPDATE s SET id = id + 100 WHERE id >= 3;
UPDATE p SET id = id + 100 WHERE id >= 3;
UPDATE s SET id = 5 WHERE id IS NULL AND name = 'dee';
UPDATE p SET id = 5 WHERE id IS NULL AND name = 'dee';
SELECT * FROM check_indexes('s', 'p');
-- the old values are gone from the indexes, the new ones are in them
SET enable_seqscan = off;
SELECT id FROM s WHERE name = 'ann' OR doc @> '{"a": 1}';
SELECT id FROM s WHERE name = 'ann2' AND lower(kind) = 'red!' AND doc @> '{"a": 10}';
SELECT id FROM s WHERE id IN (3, 4, 103, 104) ORDER BY id;
RESET enable_seqscan;

-- DELETE
DELETE FROM s WHERE id = 2 OR name IS NULL;
DELETE FROM p WHERE id = 2 OR name IS NULL;
SELECT * FROM check_indexes('s', 'p');

-- COPY FROM STDIN
COPY s FROM STDIN;
10	eve	Red	{"a": 1}	\N
11	fay	blue	{"e": [3]}	copied
\N	gus	\N	\N	\N
\.
COPY p FROM STDIN;
10	eve	Red	{"a": 1}	\N
11	fay	blue	{"e": [3]}	copied
\N	gus	\N	\N	\N
\.
SELECT * FROM check_indexes('s', 'p');

-- TRUNCATE empties every index; rows written after it are in them
TRUNCATE s;
TRUNCATE p;
SELECT * FROM check_indexes('s', 'p');
INSERT INTO s VALUES (1, 'ann', 'Red', '{"a": 1}', NULL), (2, 'bob', 'red', '{"a": 2}', 'x');
INSERT INTO p VALUES (1, 'ann', 'Red', '{"a": 1}', NULL), (2, 'bob', 'red', '{"a": 2}', 'x');
SELECT * FROM check_indexes('s', 'p');

--
-- Ingestion, through the workers' writer: Kafka and webhook batches
--
SELECT test_write('s', 'kafka', 'append',
  ARRAY[ROW(20, 'kay', 'Gold', '{"k": 1}', NULL), ROW(21, 'lee', NULL, '{"k": 2}', 'ingested'),
        ROW(NULL, 'mo', 'gold', NULL, NULL)]::s[]);
SELECT test_write('s', 'webhook', 'append', ARRAY[ROW(22, 'ned', 'Teal', '{"w": true}', NULL)]::s[]);
INSERT INTO p VALUES (20, 'kay', 'Gold', '{"k": 1}', NULL), (21, 'lee', NULL, '{"k": 2}', 'ingested'),
  (NULL, 'mo', 'gold', NULL, NULL), (22, 'ned', 'Teal', '{"w": true}', NULL);
SELECT * FROM check_indexes('s', 'p');

--
-- An upsert source: merges by key (a new key is an insert, a key's next
-- message an update of its row, a tombstone a delete), beside a plain
-- table written with INSERT ... ON CONFLICT and DELETE
--
CREATE FOREIGN TABLE u (id int, name text, kind text, doc jsonb, note text)
  SERVER iw_kafka OPTIONS (topic 'u', envelope 'upsert', key 'id');
CREATE TABLE up (id int PRIMARY KEY, name text, kind text, doc jsonb, note text);
CREATE INDEX u_name ON u (name);
CREATE INDEX u_kind ON u (lower(kind));
CREATE INDEX u_doc ON u USING gin (doc);
CREATE INDEX up_name ON up (name);
CREATE INDEX up_kind ON up (lower(kind));
CREATE INDEX up_doc ON up USING gin (doc);
SELECT test_write('u', 'kafka', 'upsert',
  ARRAY[ROW(1, 'ann', 'Red', '{"a": 1}', NULL), ROW(2, 'bob', 'red', '{"a": 2}', NULL),
        ROW(3, 'cid', 'blue', '{"a": 3}', NULL), ROW(1, 'ann1', 'Red', '{"a": 1}', 'again'),
        ROW(4, 'dee', NULL, NULL, NULL)]::u[]);
INSERT INTO up VALUES (1, 'ann', 'Red', '{"a": 1}', NULL), (2, 'bob', 'red', '{"a": 2}', NULL),
  (3, 'cid', 'blue', '{"a": 3}', NULL), (4, 'dee', NULL, NULL, NULL);
UPDATE up SET name = 'ann1', note = 'again' WHERE id = 1;
SELECT * FROM check_indexes('u', 'up');
-- a key's row changes its indexed columns, or only an unindexed one; a
-- tombstone; a new key; a key that comes back after its tombstone
SELECT test_write('u', 'kafka', 'upsert',
  ARRAY[ROW(2, 'bob2', 'RED', '{"a": 22}', NULL), ROW(3, 'cid', 'blue', '{"a": 3}', 'same')]::u[]);
SELECT test_write('u', 'kafka', 'tombstone', ARRAY[ROW(4, NULL, NULL, NULL, NULL)]::u[]);
SELECT test_write('u', 'webhook', 'upsert',
  ARRAY[ROW(5, 'eve', 'Green', '{"e": 5}', NULL), ROW(4, 'dee again', 'x', '{}', NULL)]::u[]);
INSERT INTO up VALUES (2, 'bob2', 'RED', '{"a": 22}', NULL), (3, 'cid', 'blue', '{"a": 3}', 'same')
  ON CONFLICT (id) DO UPDATE SET name = excluded.name, kind = excluded.kind, doc = excluded.doc,
                                 note = excluded.note;
DELETE FROM up WHERE id = 4;
INSERT INTO up VALUES (5, 'eve', 'Green', '{"e": 5}', NULL), (4, 'dee again', 'x', '{}', NULL)
  ON CONFLICT (id) DO UPDATE SET name = excluded.name, kind = excluded.kind, doc = excluded.doc,
                                 note = excluded.note;
SELECT * FROM check_indexes('u', 'up');
-- and a person's edits of an upsert source
UPDATE u SET name = 'cid2', kind = 'BLUE' WHERE id = 3;
UPDATE up SET name = 'cid2', kind = 'BLUE' WHERE id = 3;
DELETE FROM u WHERE id = 5;
DELETE FROM up WHERE id = 5;
SELECT * FROM check_indexes('u', 'up');

--
-- retry_errors(): kept messages, decoded again and written by the
-- workers' ingestion
--
INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error)
VALUES ('s', 0, 0, 1, NULL, '{"id": 30, "name": "ora", "kind": "Red", "doc": {"r": 1}}', 'old reason'),
       ('s', 0, 0, 2, NULL, '{"id": 31, "name": "pat", "doc": {"r": 2}}', 'old reason'),
       ('u', 0, 0, 1, '2', '{"id": 2, "name": "bob3", "kind": "Teal", "doc": {"r": 3}}', 'old reason'),
       ('u', 0, 0, 2, '6', '{"id": 6, "name": "quin", "kind": "Teal"}', 'old reason'),
       ('u', 0, 0, 3, '1', NULL, 'old reason');
SELECT source_writes.retry_errors('s');
SELECT source_writes.retry_errors('u');
SELECT count(*) FROM source_writes.errors;
INSERT INTO p VALUES (30, 'ora', 'Red', '{"r": 1}', NULL), (31, 'pat', NULL, '{"r": 2}', NULL);
UPDATE up SET name = 'bob3', kind = 'Teal', doc = '{"r": 3}' WHERE id = 2;
INSERT INTO up VALUES (6, 'quin', 'Teal', NULL, NULL);
DELETE FROM up WHERE id = 1;
SELECT * FROM check_indexes('s', 'p');
SELECT * FROM check_indexes('u', 'up');

--
-- A unique index keeps its promise.  A person's INSERT, UPDATE or COPY
-- that duplicates a key is PostgreSQL's 23505, naming the index and said
-- of the table, as on the plain table; the key of an upsert source keeps
-- its own message
--
SELECT * FROM error_of($$INSERT INTO s VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO p VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$UPDATE s SET id = 2 WHERE id = 1$$);
SELECT * FROM error_of($$UPDATE p SET id = 2 WHERE id = 1$$);
SELECT * FROM error_of($$COPY s (id) FROM PROGRAM 'echo 20'$$);
SELECT * FROM error_of($$COPY p (id) FROM PROGRAM 'echo 20'$$);
SELECT * FROM error_of($$INSERT INTO s VALUES (40, 'a', NULL, NULL, NULL), (40, 'b', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO p VALUES (40, 'a', NULL, NULL, NULL), (40, 'b', NULL, NULL, NULL)$$);
CREATE UNIQUE INDEX u_name_unique ON u (lower(name));
CREATE UNIQUE INDEX up_name_unique ON up (lower(name));
SELECT * FROM error_of($$INSERT INTO u VALUES (7, 'bob3', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO up VALUES (7, 'bob3', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$UPDATE u SET name = 'bob3' WHERE id = 3$$);
SELECT * FROM error_of($$UPDATE up SET name = 'bob3' WHERE id = 3$$);
SELECT * FROM error_of($$INSERT INTO u VALUES (2, 'new', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO up VALUES (2, 'new', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$UPDATE u SET id = 2 WHERE id = 3$$);
SELECT * FROM error_of($$UPDATE up SET id = 2 WHERE id = 3$$);
-- the key's values are shown to those who may read them, as on the plain
-- table
CREATE ROLE iw_clerk;
GRANT USAGE ON SCHEMA iw TO iw_clerk;
GRANT SELECT, INSERT ON s, p TO iw_clerk;
GRANT INSERT ON u, up TO iw_clerk;
SET ROLE iw_clerk;
SELECT * FROM error_of($$INSERT INTO s VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO p VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO u VALUES (7, 'bob3', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO up VALUES (7, 'bob3', NULL, NULL, NULL)$$);
RESET ROLE;
-- or the key's columns (an expression's are not enough)
CREATE ROLE iw_colclerk;
GRANT USAGE ON SCHEMA iw TO iw_colclerk;
GRANT SELECT (id), INSERT ON s, p TO iw_colclerk;
GRANT SELECT (name), INSERT ON u, up TO iw_colclerk;
SET ROLE iw_colclerk;
SELECT * FROM error_of($$INSERT INTO s VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO p VALUES (1, 'dup', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO u VALUES (7, 'bob3', NULL, NULL, NULL)$$);
SELECT * FROM error_of($$INSERT INTO up VALUES (7, 'bob3', NULL, NULL, NULL)$$);
RESET ROLE;
-- in psql's words
INSERT INTO s VALUES (1, 'dup', NULL, NULL, NULL);
UPDATE u SET name = 'bob3' WHERE id = 3;
-- nothing of them was written
SELECT * FROM check_indexes('s', 'p');
SELECT * FROM check_indexes('u', 'up');

-- An ingested row that a unique index refuses: the workers' writer raises
-- PostgreSQL's error (the test door, one batch) ...
SELECT * FROM error_of($$SELECT test_write('s', 'kafka', 'append', ARRAY[ROW(50, 'x', NULL, NULL, NULL), ROW(1, 'dup', NULL, NULL, NULL)]::s[])$$);
SELECT * FROM error_of($$SELECT test_write('u', 'kafka', 'upsert', ARRAY[ROW(8, 'bob3', NULL, NULL, NULL)]::u[])$$);
SELECT count(*) FROM s WHERE id = 50;
-- ... and ingestion keeps the message as an error, with the violation,
-- and writes the others: here a message that duplicates a row of the
-- table, and one that duplicates a message before it
INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error)
VALUES ('s', 0, 0, 11, NULL, '{"id": 1, "name": "dup of a row"}', 'old reason'),
       ('s', 0, 0, 12, NULL, '{"id": 60, "name": "first"}', 'old reason'),
       ('s', 0, 0, 13, NULL, '{"id": 60, "name": "second"}', 'old reason'),
       ('s', 0, 0, 14, NULL, '{"id": 61, "name": "good"}', 'old reason'),
       ('u', 0, 0, 11, '9', '{"id": 9, "name": "bob3"}', 'old reason'),
       ('u', 0, 0, 12, '10', '{"id": 10, "name": "ray"}', 'old reason');
SELECT source_writes.retry_errors('s');
SELECT source_writes.retry_errors('u');
SELECT source, "offset", error FROM source_writes.errors ORDER BY 1, 2;
SELECT id, name FROM s WHERE id IN (1, 60, 61) ORDER BY id;
SELECT id, name FROM u WHERE id IN (9, 10) ORDER BY id;
-- once the conflicting rows are fixed, retry_errors() takes them
DELETE FROM s WHERE id IN (1, 60);
UPDATE u SET name = 'bob4' WHERE id = 2;
SELECT source_writes.retry_errors('s');
SELECT source_writes.retry_errors('u');
SELECT count(*) FROM source_writes.errors;
SELECT id, name FROM s WHERE id IN (1, 60, 61) ORDER BY id;
SELECT id, name FROM u WHERE id IN (2, 9, 10) ORDER BY id;
DELETE FROM p WHERE id = 1;
INSERT INTO p VALUES (1, 'dup of a row', NULL, NULL, NULL), (60, 'second', NULL, NULL, NULL),
  (61, 'good', NULL, NULL, NULL);
UPDATE up SET name = 'bob4' WHERE id = 2;
INSERT INTO up VALUES (9, 'bob3', NULL, NULL, NULL), (10, 'ray', NULL, NULL, NULL);
SELECT * FROM check_indexes('s', 'p');
SELECT * FROM check_indexes('u', 'up');

--
-- ALTER ... TYPE of an indexed column rebuilds its indexes, in the
-- table's schema, as for the plain table; where the plain table refuses
-- (no GIN operator class for text), so does the source
--
ALTER FOREIGN TABLE s ALTER COLUMN id TYPE bigint;
ALTER TABLE p ALTER COLUMN id TYPE bigint;
ALTER FOREIGN TABLE s ALTER COLUMN kind TYPE varchar(10);
ALTER TABLE p ALTER COLUMN kind TYPE varchar(10);
ALTER FOREIGN TABLE s ALTER COLUMN doc TYPE text;
ALTER TABLE p ALTER COLUMN doc TYPE text;
SELECT schemaname, indexname, indexdef FROM source_writes.indexes WHERE tablename = 's'
ORDER BY indexname;
SELECT schemaname, indexname, indexdef FROM pg_indexes WHERE tablename = 'p'
ORDER BY indexname;
SELECT relname, relnamespace::regnamespace FROM pg_class
WHERE relname IN ('s_id', 's_name', 's_kind', 's_doc') ORDER BY 1;
SELECT * FROM check_indexes('s', 'p');
-- a conversion that makes two keys one: the unique index refuses it
CREATE FOREIGN TABLE s2 (id numeric, v text) SERVER iw_kafka OPTIONS (topic 's2');
CREATE TABLE p2 (id numeric, v text);
CREATE UNIQUE INDEX s2_id ON s2 (id);
CREATE UNIQUE INDEX p2_id ON p2 (id);
INSERT INTO s2 VALUES (1.2, 'a'), (1.4, 'b');
INSERT INTO p2 VALUES (1.2, 'a'), (1.4, 'b');
SELECT * FROM error_of($$ALTER FOREIGN TABLE s2 ALTER COLUMN id TYPE int$$);
SELECT * FROM error_of($$ALTER TABLE p2 ALTER COLUMN id TYPE int$$);
SELECT * FROM check_indexes('s2', 'p2');
DELETE FROM s2 WHERE v = 'b';
DELETE FROM p2 WHERE v = 'b';
ALTER FOREIGN TABLE s2 ALTER COLUMN id TYPE int;
ALTER TABLE p2 ALTER COLUMN id TYPE int;
SELECT * FROM check_indexes('s2', 'p2');
INSERT INTO s VALUES (3000000000, 'big', 'Red', '{"big": true}', NULL);
INSERT INTO p VALUES (3000000000, 'big', 'Red', '{"big": true}', NULL);
SELECT * FROM check_indexes('s', 'p');

--
-- ADD COLUMN: the rows get its default (a batch of the system's) in every
-- index; an index on it, then rows written after it
--
ALTER FOREIGN TABLE s ADD COLUMN tag text DEFAULT 'tagged';
ALTER TABLE p ADD COLUMN tag text DEFAULT 'tagged';
SELECT * FROM check_indexes('s', 'p');
CREATE INDEX s_tag ON s (tag);
CREATE INDEX p_tag ON p (tag);
UPDATE s SET tag = 'odd' WHERE id % 2 = 1;
UPDATE p SET tag = 'odd' WHERE id % 2 = 1;
INSERT INTO s VALUES (70, 'new', NULL, NULL, NULL, 'late');
INSERT INTO p VALUES (70, 'new', NULL, NULL, NULL, 'late');
SELECT test_write('s', 'kafka', 'append', ARRAY[ROW(71, 'ingested', NULL, NULL, NULL, 'late')]::s[]);
INSERT INTO p VALUES (71, 'ingested', NULL, NULL, NULL, 'late');
SELECT * FROM check_indexes('s', 'p');

--
-- VACUUM FULL of the hidden heap, and CLUSTER, rebuild its indexes
--
SELECT current_rel AS hidden FROM source_writes.source_tables WHERE relid = 's'::regclass \gset
VACUUM FULL :hidden;
VACUUM FULL p;
SELECT * FROM check_indexes('s', 'p');
-- CLUSTER of a source table orders its hidden heap by one of its indexes,
-- and marks it for the next CLUSTER, as for a plain table; only the owner
-- may
CLUSTER u;
CLUSTER up;
CLUSTER s USING s_nope;
CLUSTER p USING p_nope;
SET ROLE iw_clerk;
CLUSTER s USING s_name;
CLUSTER p USING p_name;
RESET ROLE;
UPDATE s SET name = 'a' || name WHERE id % 3 = 0;
UPDATE p SET name = 'a' || name WHERE id % 3 = 0;
CLUSTER s USING s_name;
CLUSTER p USING p_name;
SELECT indexname FROM source_writes.indexes i JOIN pg_index x ON x.indexrelid = i.indexname::regclass
WHERE i.tablename = 's' AND x.indisclustered;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT array_agg(name) AS in_the_heap FROM s;
SELECT array_agg(name) AS in_the_heap FROM p;
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT * FROM check_indexes('s', 'p');
UPDATE s SET name = 'b' || name WHERE id % 2 = 0;
UPDATE p SET name = 'b' || name WHERE id % 2 = 0;
CLUSTER (VERBOSE false) s;
CLUSTER (VERBOSE false) p;
SELECT * FROM check_indexes('s', 'p');
-- the key of an upsert source, by its name in the heap's schema, or
-- CLUSTER of the heap itself (as superuser)
SELECT current_rel AS hidden, indexname AS key FROM source_writes.source_tables,
       source_writes.indexes
WHERE relid = 'u'::regclass AND tablename = 'u' AND indexname ~ '^current_' \gset
CLUSTER u USING :key;
CLUSTER :hidden USING :key;
CLUSTER up USING up_pkey;
SELECT * FROM check_indexes('u', 'up');
-- and they go on being kept after it
INSERT INTO u VALUES (11, 'sid', 'Red', '{"z": 1}', NULL);
INSERT INTO up VALUES (11, 'sid', 'Red', '{"z": 1}', NULL);
SELECT test_write('u', 'kafka', 'upsert', ARRAY[ROW(11, 'sid2', 'Red', '{"z": 2}', NULL)]::u[]);
UPDATE up SET name = 'sid2', doc = '{"z": 2}' WHERE id = 11;
SELECT * FROM check_indexes('u', 'up');

--
-- Reads as of a time are those of the time, whatever the indexes say
--
SELECT set_config('source_writes.as_of', :before_writes::text, false) IS NOT NULL;
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id::int, name, kind::text, doc::jsonb, note FROM s
                      EXCEPT ALL SELECT * FROM s_then) d;
SELECT count(*) FROM (SELECT * FROM s_then
                      EXCEPT ALL SELECT id::int, name, kind::text, doc::jsonb, note FROM s) d;
SELECT id, name FROM s WHERE id = 4;
SELECT id, name FROM s WHERE name = 'cid';
RESET enable_seqscan;
RESET source_writes.as_of;
SELECT id, name FROM s WHERE id = 4;

DROP SERVER iw_kafka CASCADE;
DROP SCHEMA iw CASCADE;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
DROP EXTENSION amcheck;
DROP ROLE iw_clerk, iw_colclerk;
RESET search_path;
