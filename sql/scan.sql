--
-- Scan: SELECT reads the current rows of a source table straight from its
-- hidden heap, under the query's snapshot, and carries each row's identity.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');

CREATE FOREIGN TABLE orders (
    id int,
    customer text,
    amount numeric,
    tags jsonb,
    part int OPTIONS (source 'partition'),
    off bigint OPTIONS (source 'offset')
) SERVER kafka OPTIONS (topic 'orders');
CREATE FOREIGN TABLE calls (body jsonb OPTIONS (source 'body'),
                            received timestamptz OPTIONS (source 'received_at'))
  SERVER hooks;

-- Rows go in as JSON, one object per row.
CREATE FUNCTION put_rows(src regclass, rows json) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('INSERT INTO %s SELECT * FROM json_populate_recordset(NULL::%s, %L)',
                 src, src, rows);
END
$$;

SELECT * FROM orders;

SELECT put_rows('orders', '[
  {"id": 1, "customer": "ann", "amount": 10.50, "tags": ["new"], "part": 0, "off": 0},
  {"id": 2, "customer": "bob", "amount": 20, "tags": null, "part": 1, "off": 0},
  {"id": 3, "customer": "ann", "amount": 7.25, "tags": [], "part": 0, "off": 1},
  {"id": 3, "customer": "ann", "amount": 7.25, "tags": [], "part": 0, "off": 1},
  {"id": 4, "customer": null, "amount": null, "tags": null, "part": 1, "off": 1}
]');

-- all rows, duplicates included (a source table is a multiset)
SELECT * FROM orders ORDER BY id, off;

-- the row identity: the hidden tuple's ctid, distinct for equal rows
SELECT ctid, id FROM orders ORDER BY ctid;
SELECT count(DISTINCT ctid) = count(*) AS identities_distinct FROM orders;
SELECT id FROM orders WHERE ctid = '(0,2)';

-- filters, projections, aggregates, whole-row references
SELECT customer, count(*), sum(amount) FROM orders GROUP BY customer ORDER BY customer;
SELECT id, amount * 2 AS doubled FROM orders WHERE amount > 8 ORDER BY id;
SELECT o FROM orders o WHERE id = 2;
SELECT count(*) FROM orders WHERE customer IS NULL;
SELECT off FROM orders WHERE tags ? 'new';

-- joins and rescans: a correlated subquery scans the source again for
-- every outer row
CREATE TABLE customers (name text PRIMARY KEY, city text);
INSERT INTO customers VALUES ('ann', 'Oslo'), ('bob', 'Lima'), ('cy', 'Pune');
EXPLAIN (COSTS OFF)
SELECT c.city, (SELECT count(*) FROM orders o WHERE o.customer = c.name) FROM customers c;
SELECT c.city, (SELECT count(*) FROM orders o WHERE o.customer = c.name) FROM customers c
ORDER BY 1;
SELECT c.city, o.id FROM customers c JOIN orders o ON o.customer = c.name ORDER BY 1, 2;

-- self-join: two scans of one source in one query
SELECT a.id, b.id FROM orders a JOIN orders b ON a.off = b.off AND a.part = b.part
WHERE a.ctid < b.ctid ORDER BY 1, 2;

-- prepared statements, through the custom and then the generic plan
PREPARE by_customer(text) AS SELECT count(*) FROM orders WHERE customer = $1;
EXECUTE by_customer('ann');
EXECUTE by_customer('bob');
EXECUTE by_customer('ann');
EXECUTE by_customer('bob');
EXECUTE by_customer('ann');
EXECUTE by_customer('ann');
DEALLOCATE by_customer;

-- cursors
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM orders ORDER BY ctid;
FETCH 2 FROM c;
FETCH 2 FROM c;
CLOSE c;
DECLARE s SCROLL CURSOR FOR SELECT id FROM orders;
FETCH LAST FROM s;
FETCH FIRST FROM s;
COMMIT;

-- the query's snapshot decides what is seen: a row put in after a cursor
-- opened is not seen by it, but by the next statement
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM orders;
DECLARE later CURSOR FOR SELECT count(*) FROM orders;
SELECT put_rows('orders', '[{"id": 5, "customer": "cy", "part": 2, "off": 0}]');
FETCH ALL FROM later;
SELECT count(*) FROM orders;
ROLLBACK;
SELECT count(*) FROM orders;

-- dropped columns and added ones
ALTER FOREIGN TABLE orders DROP COLUMN tags;
ALTER FOREIGN TABLE orders ADD COLUMN note text;
SELECT * FROM orders ORDER BY id, off;
SELECT o FROM orders o WHERE id = 1;

-- EXPLAIN names the source
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE id = 1;
EXPLAIN (COSTS OFF) SELECT * FROM calls;
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM orders;
EXPLAIN (COSTS OFF, FORMAT JSON) SELECT id FROM orders;

-- the planner's row estimate comes from the hidden heap, as for a table
SELECT put_rows('orders', (SELECT json_agg(json_build_object('id', g, 'part', 0, 'off', g))
                           FROM generate_series(100, 1099) g));
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders;
SELECT count(*) FROM orders;

-- large tables are scanned in parallel, with the same result
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(id) FROM orders;
SELECT count(*), sum(id), count(DISTINCT ctid) FROM orders;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_tuple_cost;
RESET parallel_setup_cost;
SELECT count(*), sum(id), count(DISTINCT ctid) FROM orders;

-- ANALYZE samples the current rows
ANALYZE orders;
SELECT reltuples FROM pg_class WHERE oid = 'orders'::regclass;
SELECT attname, null_frac FROM pg_stats WHERE tablename = 'orders' AND attname IN ('id', 'customer') ORDER BY 1;

-- a row read from a source is a row of the table and nothing more: it can
-- be kept in a record, returned, turned into JSON, looped over, stored in
-- a column of the table's type, and handed to triggers and SQL functions
CREATE FUNCTION first_order() RETURNS orders LANGUAGE plpgsql AS $$
DECLARE
  r orders;
BEGIN
  SELECT * INTO r FROM orders ORDER BY id, off LIMIT 1;
  RETURN r;
END
$$;
SELECT * FROM first_order();
SELECT row_to_json(o) FROM orders o WHERE id = 2;
CREATE FUNCTION orders_as_json() RETURNS SETOF json LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM orders WHERE id < 100 ORDER BY id, off LOOP
    RETURN NEXT row_to_json(r);
  END LOOP;
END
$$;
SELECT * FROM orders_as_json();
CREATE TABLE kept_orders (o orders);
CREATE FUNCTION keep_orders() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  r orders;
  n bigint := 0;
BEGIN
  FOR r IN SELECT * FROM orders WHERE id < 100 LOOP
    INSERT INTO kept_orders VALUES (r);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;
SELECT keep_orders();
INSERT INTO kept_orders SELECT o FROM orders o WHERE id = 4;
SELECT (o).id, (o).customer, o FROM kept_orders ORDER BY (o).id, (o).off;
CREATE FUNCTION orders_of(text) RETURNS SETOF orders LANGUAGE sql
AS $$ SELECT * FROM orders WHERE customer = $1 $$;
SELECT * FROM orders_of('ann') ORDER BY id, off;
-- a trigger on the source sees its rows as rows of the table
CREATE TABLE seen_by_trigger (old_row json, new_row json);
CREATE FUNCTION note_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  before orders := OLD;
BEGIN
  INSERT INTO seen_by_trigger VALUES (row_to_json(before), row_to_json(NEW));
  RETURN NEW;
END
$$;
CREATE TRIGGER note_update BEFORE UPDATE ON orders
  FOR EACH ROW EXECUTE FUNCTION note_update();
UPDATE orders SET note = 'seen' WHERE id = 2;
SELECT * FROM seen_by_trigger;
DROP TRIGGER note_update ON orders;
DROP TABLE seen_by_trigger, kept_orders;
DROP FUNCTION note_update(), first_order(), orders_as_json(), keep_orders(), orders_of(text);

-- a row that a BEFORE INSERT trigger changes as it is copied from one
-- source to another is that row only; the next rows are read afresh
CREATE FOREIGN TABLE copy_from (id int, v text) SERVER kafka OPTIONS (topic 'copy_from');
CREATE FOREIGN TABLE copy_to (id int, v text) SERVER kafka OPTIONS (topic 'copy_to');
CREATE TABLE copy_to_plain (id int, v text);
CREATE FUNCTION mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.v := NEW.v || '+trigger';
  RETURN NEW;
END
$$;
CREATE TRIGGER mark BEFORE INSERT ON copy_to FOR EACH ROW EXECUTE FUNCTION mark();
CREATE TRIGGER mark BEFORE INSERT ON copy_to_plain FOR EACH ROW EXECUTE FUNCTION mark();
INSERT INTO copy_from SELECT g, 'v' || g FROM generate_series(1, 5) g;
INSERT INTO copy_to SELECT * FROM copy_from;
INSERT INTO copy_to_plain SELECT * FROM copy_from;
SELECT * FROM copy_to ORDER BY id;
SELECT count(*) AS differences FROM
  ((SELECT * FROM copy_to EXCEPT ALL SELECT * FROM copy_to_plain)
   UNION ALL (SELECT * FROM copy_to_plain EXCEPT ALL SELECT * FROM copy_to)) d;
DROP FOREIGN TABLE copy_from, copy_to;
DROP TABLE copy_to_plain;
DROP FUNCTION mark();

-- what never changes about a source (its storage, its kind) is cached per
-- session: planning and reading a source again does not read the
-- extension's catalog
CREATE FUNCTION catalog_reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_all_tables
  WHERE relid = 'source_writes.source_tables'::regclass
$$;
SELECT count(*) FROM orders;
SELECT pg_stat_force_next_flush();
SELECT catalog_reads() AS reads_before \gset
DO $$
BEGIN
  FOR i IN 1..20 LOOP
    EXECUTE 'SELECT count(*) FROM orders';
    EXECUTE 'UPDATE orders SET note = note WHERE false';
  END LOOP;
END
$$;
SELECT pg_stat_force_next_flush();
SELECT catalog_reads() - :reads_before AS catalog_reads;
DROP FUNCTION catalog_reads();

-- an empty webhook table
SELECT * FROM calls;

-- a source table gets a parallel plan where a plain table of its rows
-- would, and only there: 600,000 narrow rows are scanned in parallel ...
CREATE FOREIGN TABLE narrow (a int, b int) SERVER kafka OPTIONS (topic 'narrow');
CREATE TABLE plain_narrow (a int, b int);
INSERT INTO narrow SELECT g, g FROM generate_series(1, 600000) g;
INSERT INTO plain_narrow SELECT g, g FROM generate_series(1, 600000) g;
VACUUM ANALYZE plain_narrow;
ANALYZE narrow;
EXPLAIN (COSTS OFF) SELECT count(*) FROM narrow;
EXPLAIN (COSTS OFF) SELECT count(*) FROM plain_narrow;
SELECT count(*), sum(a) FROM narrow;
-- ... 200,000 wider ones are not
CREATE FOREIGN TABLE wide (a int, b text) SERVER kafka OPTIONS (topic 'wide');
CREATE TABLE plain_wide (a int, b text);
INSERT INTO wide SELECT g, repeat('w', 40) FROM generate_series(1, 200000) g;
INSERT INTO plain_wide SELECT g, repeat('w', 40) FROM generate_series(1, 200000) g;
VACUUM ANALYZE plain_wide;
ANALYZE wide;
EXPLAIN (COSTS OFF) SELECT count(*) FROM wide;
EXPLAIN (COSTS OFF) SELECT count(*) FROM plain_wide;

-- ANALYZE samples blocks of the current rows, as it samples a table, and
-- does not read them all: with a 300-row sample, at most 300 of the
-- narrow table's 3,000-odd blocks
CREATE FUNCTION blocks_read(src regclass) RETURNS bigint LANGUAGE sql AS $$
  SELECT heap_blks_read + heap_blks_hit FROM pg_statio_all_tables
  WHERE relid = (SELECT current_rel FROM source_writes.source_tables WHERE relid = src)
$$;
SET default_statistics_target = 1;
SELECT pg_stat_force_next_flush();
SELECT blocks_read('narrow') AS blocks_before \gset
ANALYZE narrow;
SELECT pg_stat_force_next_flush();
SELECT blocks_read('narrow') - :blocks_before BETWEEN 1 AND 310 AS sampled,
       pg_relation_size((SELECT current_rel FROM source_writes.source_tables
                         WHERE relid = 'narrow'::regclass)) / 8192 > 3000 AS big;
RESET default_statistics_target;
SELECT reltuples BETWEEN 570000 AND 630000 AS estimate_close FROM pg_class WHERE oid = 'narrow'::regclass;
DROP FUNCTION blocks_read(regclass);
DROP FOREIGN TABLE narrow, wide;
DROP TABLE plain_narrow, plain_wide;

-- privileges are the foreign table's
CREATE ROLE regress_sw_reader;
SET ROLE regress_sw_reader;
SELECT count(*) FROM orders;
RESET ROLE;
GRANT SELECT ON orders TO regress_sw_reader;
SET ROLE regress_sw_reader;
SELECT count(*) FROM orders;
-- the hidden heaps stay closed
SELECT count(*) FROM source_writes_internal.nothing;
RESET ROLE;
REVOKE SELECT ON orders FROM regress_sw_reader;
DROP ROLE regress_sw_reader;

DROP TABLE customers;
DROP SERVER kafka, hooks CASCADE;
