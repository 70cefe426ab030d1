--
-- The planner finds the rows of a source table through its indexes as it
-- finds a plain table's: PostgreSQL's own index, index-only, bitmap,
-- ordered and parameterized paths, with the index AMs' estimates.  Each
-- query shows the source table's plan, and its rows are compared with
-- those of a plain table with the same rows and indexes (in order where
-- the query orders them).  UPDATE and DELETE find their rows the same
-- way; reads as of a time use no index.
--
CREATE EXTENSION pg_trgm;
CREATE SCHEMA isc;
SET search_path = isc, public;
CREATE SERVER isc_kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE ev (id int, at timestamptz, kind text, doc jsonb, body text,
                         note text)
  SERVER isc_kafka OPTIONS (topic 'ev', retain_history '1 day');
CREATE TABLE ev_plain (id int, at timestamptz, kind text, doc jsonb, body text,
                       note text) WITH (autovacuum_enabled = off);
INSERT INTO ev
  SELECT g, '2026-01-01 00:00+00'::timestamptz + g * interval '1 minute',
         'kind ' || g % 7, jsonb_build_object('c', g % 100),
         'event number ' || g || CASE WHEN g % 1000 = 0 THEN ' rare' ELSE '' END,
         CASE WHEN g % 50 = 0 THEN 'noted' END
  FROM generate_series(1, 20000) g;
INSERT INTO ev_plain SELECT * FROM ev;
-- a column added after the table was made sits elsewhere in the heap
ALTER FOREIGN TABLE ev ADD COLUMN late int;
ALTER TABLE ev_plain ADD COLUMN late int;
UPDATE ev SET late = id % 500;
UPDATE ev_plain SET late = id % 500;

CREATE UNIQUE INDEX ev_id ON ev (id);
CREATE INDEX ev_at ON ev (at);
CREATE INDEX ev_kind_lower ON ev (lower(kind));
CREATE INDEX ev_noted ON ev (id) WHERE note IS NOT NULL;
CREATE INDEX ev_doc ON ev USING gin (doc);
CREATE INDEX ev_words ON ev USING gin (to_tsvector('simple', body));
CREATE INDEX ev_trgm ON ev USING gin (body gin_trgm_ops);
CREATE INDEX ev_late ON ev (late);
CREATE INDEX ev_span ON ev USING gist (int4range(id, id + 10));
CREATE UNIQUE INDEX ev_plain_id ON ev_plain (id);
CREATE INDEX ev_plain_at ON ev_plain (at);
CREATE INDEX ev_plain_kind_lower ON ev_plain (lower(kind));
CREATE INDEX ev_plain_noted ON ev_plain (id) WHERE note IS NOT NULL;
CREATE INDEX ev_plain_doc ON ev_plain USING gin (doc);
CREATE INDEX ev_plain_words ON ev_plain USING gin (to_tsvector('simple', body));
CREATE INDEX ev_plain_trgm ON ev_plain USING gin (body gin_trgm_ops);
CREATE INDEX ev_plain_late ON ev_plain (late);
CREATE INDEX ev_plain_span ON ev_plain USING gist (int4range(id, id + 10));
-- plans that stay put: autovacuum off for both heaps
SELECT current_rel AS hidden FROM source_writes.source_tables
WHERE relid = 'ev'::regclass \gset
ALTER TABLE :hidden SET (autovacuum_enabled = off);
VACUUM ANALYZE :hidden;
VACUUM ANALYZE ev_plain;
ANALYZE ev;

-- a query's rows on both tables (TBL stands for the table, ev unless
-- another is named, beside it the plain table of that name and "_plain"),
-- in the query's order: the same, or not
CREATE FUNCTION same_rows(query text, tbl text DEFAULT 'ev') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  s text[];
  p text[];
BEGIN
  EXECUTE format('SELECT array_agg(q::text) FROM (%s) q', replace(query, 'TBL', tbl)) INTO s;
  EXECUTE format('SELECT array_agg(q::text) FROM (%s) q', replace(query, 'TBL', tbl || '_plain')) INTO p;
  RETURN CASE WHEN s IS NOT DISTINCT FROM p
              THEN format('same rows: %s', coalesce(cardinality(s), 0))
              ELSE format('DIFFERENT: %s against %s', s, p) END;
END $$;

-- a query's plan, as EXPLAIN (COSTS OFF) shows it
CREATE FUNCTION plan_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || query;
END $$;

-- equality, ranges, IN and = ANY, IS NULL
EXPLAIN (COSTS OFF) SELECT * FROM ev WHERE id = 4242;
EXPLAIN (COSTS OFF, FORMAT JSON) SELECT id FROM ev WHERE id < 3 ORDER BY id DESC;
SELECT same_rows('SELECT * FROM TBL WHERE id = 4242');
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE id BETWEEN 100 AND 104 ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE id BETWEEN 100 AND 104 ORDER BY id');
EXPLAIN (COSTS OFF) SELECT id, kind FROM ev WHERE id IN (3, 5, 8) ORDER BY id;
SELECT same_rows('SELECT id, kind FROM TBL WHERE id IN (3, 5, 8) ORDER BY id');
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE id = ANY ('{13, 21, 34}') ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE id = ANY (''{13, 21, 34}'') ORDER BY id');
UPDATE ev SET late = NULL WHERE id = 77;
UPDATE ev_plain SET late = NULL WHERE id = 77;
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE late IS NULL;
SELECT same_rows('SELECT id FROM TBL WHERE late IS NULL');
SELECT same_rows('SELECT id FROM TBL WHERE late = 499 ORDER BY id');

-- expression and partial indexes
EXPLAIN (COSTS OFF) SELECT count(*) FROM ev WHERE lower(kind) = 'kind 3';
SELECT same_rows('SELECT count(*) FROM TBL WHERE lower(kind) = ''kind 3''');
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE note IS NOT NULL AND id < 300 ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE note IS NOT NULL AND id < 300 ORDER BY id');

-- GIN: jsonb containment, text search, trigram LIKE (rechecked: lossy)
EXPLAIN (COSTS OFF) SELECT count(*) FROM ev WHERE doc @> '{"c": 7}';
SELECT same_rows('SELECT count(*) FROM TBL WHERE doc @> ''{"c": 7}''');
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE to_tsvector('simple', body) @@ 'rare'::tsquery ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE to_tsvector(''simple'', body) @@ ''rare''::tsquery ORDER BY id');
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE body LIKE '%number 1234%' ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE body LIKE ''%number 1234%'' ORDER BY id');

-- GiST: ranges that contain a value
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE int4range(id, id + 10) @> 4242 ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE int4range(id, id + 10) @> 4242 ORDER BY id');

-- ORDER BY ... LIMIT in index order, forward and backward
EXPLAIN (COSTS OFF) SELECT id, at FROM ev ORDER BY at DESC LIMIT 3;
SELECT same_rows('SELECT id, at FROM TBL ORDER BY at DESC LIMIT 3');
EXPLAIN (COSTS OFF) SELECT id, at FROM ev WHERE at > '2026-01-05' ORDER BY at LIMIT 3;
SELECT same_rows('SELECT id, at FROM TBL WHERE at > ''2026-01-05'' ORDER BY at LIMIT 3');

-- an hour of a range, counted from the index alone
EXPLAIN (COSTS OFF) SELECT count(*) FROM ev
WHERE at >= '2026-01-03 00:00+00' AND at < '2026-01-03 01:00+00';
SELECT same_rows('SELECT count(*) FROM TBL WHERE at >= ''2026-01-03 00:00+00'' AND at < ''2026-01-03 01:00+00''');

-- bitmaps: OR of conditions, AND of indexes
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE id < 3 OR id > 19998 ORDER BY id;
SELECT same_rows('SELECT id FROM TBL WHERE id < 3 OR id > 19998 ORDER BY id');
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ev WHERE id BETWEEN 1000 AND 1400 AND late = 1000 % 500;
SELECT same_rows('SELECT id FROM TBL WHERE id BETWEEN 1000 AND 1400 AND late = 1000 % 500 ORDER BY id');
RESET enable_indexscan;

-- a nested loop probes the index for each outer row (a plain table of
-- 20000 rows gets a hash join too, unless told otherwise)
CREATE TABLE wanted AS SELECT g * 97 AS id FROM generate_series(1, 200) g;
ANALYZE wanted;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT w.id, e.kind FROM wanted w JOIN ev e ON e.id = w.id;
SELECT same_rows('SELECT w.id, e.kind FROM wanted w JOIN TBL e ON e.id = w.id ORDER BY w.id');
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT w.id, e.kind FROM wanted w JOIN ev e ON e.id = w.id;
SELECT same_rows('SELECT w.id, e.kind FROM wanted w JOIN TBL e ON e.id = w.id ORDER BY w.id');
RESET enable_indexscan;
EXPLAIN (COSTS OFF) SELECT w.id, e.kind FROM wanted w, LATERAL (SELECT kind FROM ev WHERE ev.id = w.id + 1) e;
SELECT same_rows('SELECT w.id, e.kind FROM wanted w, LATERAL (SELECT kind FROM TBL WHERE TBL.id = w.id + 1) e ORDER BY w.id');
RESET enable_hashjoin;
RESET enable_mergejoin;

-- UPDATE and DELETE find their rows through the index, and every later
-- read sees the change through it
EXPLAIN (COSTS OFF) UPDATE ev SET kind = 'fixed' WHERE id = 4242;
UPDATE ev SET kind = 'fixed' WHERE id = 4242;
UPDATE ev_plain SET kind = 'fixed' WHERE id = 4242;
EXPLAIN (COSTS OFF) DELETE FROM ev WHERE id = 4243;
DELETE FROM ev WHERE id = 4243;
DELETE FROM ev_plain WHERE id = 4243;
UPDATE ev SET at = at + interval '1 year' WHERE id = 4244;
UPDATE ev_plain SET at = at + interval '1 year' WHERE id = 4244;
SELECT same_rows('SELECT id, kind FROM TBL WHERE id BETWEEN 4241 AND 4245 ORDER BY id');
SELECT same_rows('SELECT id, at FROM TBL ORDER BY at DESC LIMIT 2');
SELECT same_rows('SELECT count(*) FROM TBL WHERE lower(kind) = ''fixed''');
-- and the heap's own rows still count once through an index-only scan
SELECT same_rows('SELECT count(*) FROM TBL WHERE id BETWEEN 4000 AND 4500');

-- an index scan over rows deleted in earlier transactions: btree marks
-- their entries dead as it goes, as for a plain table
DELETE FROM ev WHERE id BETWEEN 6000 AND 9000;
DELETE FROM ev_plain WHERE id BETWEEN 6000 AND 9000;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
EXPLAIN (COSTS OFF) SELECT count(*), sum(late) FROM ev WHERE id BETWEEN 5000 AND 10000;
SELECT same_rows('SELECT count(*), sum(late) FROM TBL WHERE id BETWEEN 5000 AND 10000');
SELECT same_rows('SELECT count(*), sum(late) FROM TBL WHERE id BETWEEN 5000 AND 10000');
RESET enable_bitmapscan;
RESET enable_indexonlyscan;

-- a domain's column is its base type's in the heap: expression and
-- partial indexes on it serve the queries that a plain table's serve
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE FOREIGN TABLE dm (id int, n posint, name text)
  SERVER isc_kafka OPTIONS (topic 'dm');
CREATE TABLE dm_plain (id int, n posint, name text) WITH (autovacuum_enabled = off);
INSERT INTO dm SELECT g, g, 'name ' || g FROM generate_series(1, 2000) g;
INSERT INTO dm_plain SELECT * FROM dm;
CREATE INDEX dm_id ON dm (id);
CREATE INDEX dm_n1 ON dm ((n + 1));
CREATE INDEX dm_n2 ON dm ((n * 2)) WHERE n > 1000;
CREATE INDEX dm_plain_id ON dm_plain (id);
CREATE INDEX dm_plain_n1 ON dm_plain ((n + 1));
CREATE INDEX dm_plain_n2 ON dm_plain ((n * 2)) WHERE n > 1000;
SELECT current_rel AS dm_hidden FROM source_writes.source_tables
WHERE relid = 'dm'::regclass \gset
ALTER TABLE :dm_hidden SET (autovacuum_enabled = off);
VACUUM ANALYZE :dm_hidden;
VACUUM ANALYZE dm_plain;
ANALYZE dm;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM dm WHERE n + 1 = 43;
SELECT same_rows('SELECT id FROM TBL WHERE n + 1 = 43', 'dm');
EXPLAIN (COSTS OFF) SELECT id FROM dm WHERE n * 2 = 3000 AND n > 1000;
SELECT same_rows('SELECT id FROM TBL WHERE n * 2 = 3000 AND n > 1000', 'dm');
-- estimates made while index paths are costed (a partial index's
-- predicate, the range of a LIKE prefix) read no actual extremes through
-- the foreign table, which has no table AM to read them with
CREATE INDEX dm_name ON dm (name) WHERE id > 5;
CREATE INDEX dm_name_prefix ON dm (name text_pattern_ops);
CREATE INDEX dm_plain_name ON dm_plain (name) WHERE id > 5;
CREATE INDEX dm_plain_name_prefix ON dm_plain (name text_pattern_ops);
ANALYZE dm;
ANALYZE dm_plain;
SELECT same_rows('SELECT id FROM TBL WHERE id > 5 AND name = ''name 50''', 'dm');
SELECT same_rows('SELECT id FROM TBL WHERE name LIKE ''name 1%'' ORDER BY id', 'dm');
SELECT same_rows('SELECT id FROM TBL WHERE name LIKE ''name 999%'' ORDER BY id', 'dm');
RESET enable_seqscan;

-- a unique index refuses a duplicate, as on a plain table
INSERT INTO ev (id, kind) VALUES (4242, 'again');
INSERT INTO ev (id, kind) VALUES (4243, 'back');
SELECT kind FROM ev WHERE id = 4243;

-- as of a time: no index, the same answer as the heaps give
SELECT max(ts) AS before_fix FROM source_writes.updates(NULL::ev) \gset
UPDATE ev SET kind = 'fixed again' WHERE id = 4242;
PREPARE newest AS SELECT id, kind FROM ev WHERE id BETWEEN 4240 AND 4244 ORDER BY id;
EXECUTE newest;
EXECUTE newest;
EXECUTE newest;
EXECUTE newest;
EXECUTE newest;
EXPLAIN (COSTS OFF) EXECUTE newest;
SELECT set_config('source_writes.as_of', :before_fix::text, false) IS NOT NULL;
SELECT regexp_replace(p, 'As Of: \d+', 'As Of: (the time)') AS "QUERY PLAN"
FROM plan_of('EXECUTE newest') p;
EXECUTE newest;
RESET source_writes.as_of;
EXECUTE newest;

DROP SERVER isc_kafka CASCADE;
DROP SCHEMA isc CASCADE;
DROP EXTENSION pg_trgm;
