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

-- an empty webhook table
SELECT * FROM calls;

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
