--
-- Invariants under a generated workload: 1,200 random statements (inserts
-- with duplicates and NULLs, multi-row updates, deletes, self-inserts), in
-- transactions that commit or roll back, some inside savepoints rolled
-- back, applied alike to a source table and to a plain table.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE w (k int, v text) SERVER kafka OPTIONS (topic 'w');
CREATE TABLE w_plain (k int, v text);
CREATE TABLE workload_stats (statements int, transactions int, rollbacks int,
                             savepoint_rollbacks int);

-- One statement of the workload, with TBL standing for the table.
CREATE FUNCTION random_statement() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r float8 := random();
  k int := floor(random() * 12)::int;
  v text := CASE WHEN random() < 0.2 THEN NULL ELSE 'v' || floor(random() * 4)::int END;
BEGIN
  RETURN CASE
    WHEN r < 0.30 THEN format('INSERT INTO TBL VALUES (%s, %L)', k, v)
    WHEN r < 0.40 THEN format('INSERT INTO TBL VALUES (%s, %L), (%s, %L), (%s, NULL)',
                              k, v, k, v, k + 1)
    WHEN r < 0.55 THEN format('UPDATE TBL SET v = %L WHERE k %% 3 = %s', v, k % 3)
    WHEN r < 0.65 THEN format('UPDATE TBL SET k = k + 1 WHERE v IS NULL AND k = %s', k)
    WHEN r < 0.75 THEN format('DELETE FROM TBL WHERE k = %s', k)
    WHEN r < 0.82 THEN format('DELETE FROM TBL WHERE v IS NOT DISTINCT FROM %L AND k > %s', v, k)
    WHEN r < 0.90 THEN format('INSERT INTO TBL SELECT k, v FROM TBL WHERE k = %s', k)
    WHEN r < 0.95 THEN format('UPDATE TBL SET v = v WHERE k < %s', k)
    ELSE format('UPDATE TBL SET k = NULL WHERE k = %s AND v IS NULL', k)
  END;
END
$$;

-- Apply n random statements alike to both tables; returns n.
CREATE FUNCTION apply_random_statements(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  stmt text;
BEGIN
  FOR i IN 1..n LOOP
    stmt := random_statement();
    EXECUTE replace(stmt, 'TBL', 'w');
    EXECUTE replace(stmt, 'TBL', 'w_plain');
  END LOOP;
  RETURN n;
END
$$;

CREATE PROCEDURE run_workload(statements int) LANGUAGE plpgsql AS $$
DECLARE
  done int := 0;
  transactions int := 0;
  rollbacks int := 0;
  savepoint_rollbacks int := 0;
BEGIN
  PERFORM setseed(0.4242);
  WHILE done < statements LOOP
    -- a transaction of up to 6 statements
    done := done + apply_random_statements(1 + floor(random() * 6)::int);
    -- sometimes more statements inside a savepoint that is rolled back
    IF random() < 0.3 THEN
      BEGIN
        done := done + apply_random_statements(1 + floor(random() * 3)::int);
        RAISE EXCEPTION 'roll back to the savepoint';
      EXCEPTION WHEN raise_exception THEN
        savepoint_rollbacks := savepoint_rollbacks + 1;
      END;
    END IF;
    transactions := transactions + 1;
    IF random() < 0.15 THEN
      ROLLBACK;
      rollbacks := rollbacks + 1;
    ELSE
      COMMIT;
    END IF;
  END LOOP;
  INSERT INTO workload_stats VALUES (done, transactions, rollbacks, savepoint_rollbacks);
END
$$;

CALL run_workload(1200);

-- the workload was not trivial
SELECT statements >= 1000 AS at_least_1000_statements,
       rollbacks > 10 AS rollbacks, savepoint_rollbacks > 10 AS savepoint_rollbacks
FROM workload_stats;
SELECT count(*) > 20 AS rows, count(*) > count(DISTINCT (k, v)) AS duplicates,
       count(*) FILTER (WHERE v IS NULL) > 0 AS null_values,
       count(*) FILTER (WHERE k IS NULL) > 0 AS null_keys
FROM w_plain;
SELECT count(*) > 100 AS batches FROM source_writes.batches WHERE source = 'w'::regclass;

-- the source table and the plain table hold the same multiset
SELECT (SELECT count(*) FROM w) = (SELECT count(*) FROM w_plain) AS same_count,
       (SELECT count(*) FROM ((SELECT * FROM w EXCEPT ALL SELECT * FROM w_plain)
                              UNION ALL
                              (SELECT * FROM w_plain EXCEPT ALL SELECT * FROM w)) d) AS differences;

-- consolidating the log gives the current contents
SELECT count(*) AS differences_from_log FROM (
  (SELECT (c).* FROM (SELECT u.data AS c
                      FROM (SELECT data, sum(diff) AS n
                            FROM source_writes.updates(NULL::w) GROUP BY data) u
                      CROSS JOIN LATERAL generate_series(1, u.n) WHERE u.n > 0) x
   EXCEPT ALL SELECT * FROM w)
  UNION ALL
  (SELECT * FROM w
   EXCEPT ALL
   SELECT (c).* FROM (SELECT u.data AS c
                      FROM (SELECT data, sum(diff) AS n
                            FROM source_writes.updates(NULL::w) GROUP BY data) u
                      CROSS JOIN LATERAL generate_series(1, u.n) WHERE u.n > 0) x)) d;

-- no row's multiplicity ever goes below zero: the running sum of each
-- row's diffs, time by time
SELECT min(running) >= 0 AS never_negative, count(*) > 0 AS checked
FROM (SELECT sum(n) OVER (PARTITION BY data ORDER BY ts) AS running
      FROM (SELECT data, ts, sum(diff) AS n
            FROM source_writes.updates(NULL::w) GROUP BY data, ts) per_time) r;

-- and every batch has its own timestamp
SELECT count(*) = count(DISTINCT ts) AS distinct_timestamps
FROM source_writes.batches WHERE source = 'w'::regclass;

-- reading the log from a time on, which reads only what the batches since
-- then wrote (the blocks they wrote current rows into, the history rows
-- they retracted), gives what reading all of it and keeping the updates
-- since that time gives, from every batch's time; and so does reading as
-- of a time, which reads only the history retracted after it
SELECT count(*) > 100 AS times_checked,
       count(*) FILTER (WHERE NOT same_log) AS log_mismatches
FROM (SELECT (SELECT array_agg(u::text ORDER BY u::text)
              FROM source_writes.updates(NULL::w, since => b.ts) u)
             IS NOT DISTINCT FROM
             (SELECT array_agg(u::text ORDER BY u::text)
              FROM source_writes.updates(NULL::w) u WHERE u.ts >= b.ts) AS same_log
      FROM source_writes.batches b WHERE b.source = 'w'::regclass) c;
CREATE FUNCTION w_as_of(t bigint) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('source_writes.as_of', t::text, true);
  RETURN QUERY SELECT w::text FROM w;
  PERFORM set_config('source_writes.as_of', '', true);
END $$;
SELECT count(*) > 100 AS times_checked,
       count(*) FILTER (WHERE NOT same_contents) AS as_of_mismatches
FROM (SELECT (SELECT array_agg(r ORDER BY r) FROM w_as_of(b.ts) r)
             IS NOT DISTINCT FROM
             (SELECT array_agg(d ORDER BY d) FROM
                (SELECT (data)::text AS d, sum(diff) AS n
                 FROM source_writes.updates(NULL::w) WHERE ts <= b.ts GROUP BY 1) u,
                generate_series(1, u.n)) AS same_contents
      FROM source_writes.batches b WHERE b.source = 'w'::regclass) c;


-- every row of the hidden heaps lies in a block where the batch that wrote
-- it says it wrote: the batch that added a current row, the batch that
-- retracted a history row
CREATE FUNCTION outside_written_blocks(source regclass, history boolean,
                                       OUT rows bigint, OUT outside bigint)
LANGUAGE plpgsql AS $$
DECLARE
  heap regclass;
  which text := CASE WHEN history THEN 'history' ELSE 'current' END;
BEGIN
  EXECUTE format('SELECT %I FROM source_writes.source_tables WHERE relid = $1',
                 which || '_rel') INTO heap USING source;
  EXECUTE format($q$
    SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
             SELECT FROM generate_subscripts(b.%2$I, 1) i
             WHERE i %% 2 = 1 AND b.%3$I = pg_relation_filenode(%1$L)
               AND (h.ctid::text::point)[0] >= b.%2$I[i]
               AND (h.ctid::text::point)[0] < b.%2$I[i + 1]))
    FROM %1$s h JOIN source_writes.batches b ON b.batch = h.%4$I$q$,
    heap, which || '_blocks', which || '_file',
    CASE WHEN history THEN '$retracted' ELSE '$batch' END)
  INTO rows, outside;
END $$;
SELECT history, rows > 20 AS many_rows, outside
FROM (VALUES (false), (true)) v(history),
     LATERAL outside_written_blocks('w', history);

-- reading in a transaction that retracted rows itself: its own batch,
-- not committed, is after every time, and the history rows it wrote are
-- read from the blocks it wrote them into, which no committed batch names
CREATE FOREIGN TABLE big (k int, v text) SERVER kafka OPTIONS (topic 'big');
INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g;
SELECT ts AS big_ts FROM source_writes.batches WHERE source = 'big'::regclass \gset
CREATE FUNCTION plan_has(query text, node text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    IF line LIKE '%' || node || '%' THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END $$;
BEGIN;
DELETE FROM big WHERE k % 2 = 0;
UPDATE big SET v = 'updated' WHERE k % 4 = 1;
SELECT count(*) AS now, count(*) FILTER (WHERE v = 'updated') AS updated FROM big;
SELECT diff, count(*) FROM source_writes.updates(NULL::big, since => :big_ts)
GROUP BY diff;
SET LOCAL source_writes.as_of = :big_ts;
SELECT count(*) AS as_of_before, count(*) FILTER (WHERE v = 'updated') AS updated
FROM big;
-- read again for each row of a lateral join: the same blocks each time
SELECT plan_has('SELECT * FROM generate_series(1, 3) g, LATERAL (SELECT count(*) AS n FROM big WHERE g > 0) x',
                'Nested Loop') AS rescanned;
SELECT count(*) AS reads, count(*) FILTER (WHERE n = 2000) AS all_rows
FROM generate_series(1, 3) g, LATERAL (SELECT count(*) AS n FROM big WHERE g > 0) x;
-- parallel workers know the transaction's own batches too (by the xmin
-- of the tuples it wrote), and read the whole history
SET LOCAL max_parallel_workers_per_gather = 2;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL parallel_leader_participation = off;
SELECT plan_has('SELECT count(*) FROM big', 'Parallel Foreign Scan') AS in_parallel;
SELECT count(*) AS as_of_before_in_parallel, count(*) FILTER (WHERE v = 'updated') AS updated
FROM big;
ROLLBACK;

-- a history heap rewritten since the batches wrote it is read whole
SELECT format('VACUUM FULL %s', history_rel) AS vacuum_history
FROM source_writes.source_tables WHERE relid = 'w'::regclass \gset
:vacuum_history;
SELECT history, outside > 0 AS moved
FROM (VALUES (true)) v(history), LATERAL outside_written_blocks('w', history);
SELECT count(*) FILTER (WHERE NOT same_log) AS log_mismatches
FROM (SELECT (SELECT array_agg(u::text ORDER BY u::text)
              FROM source_writes.updates(NULL::w, since => b.ts) u)
             IS NOT DISTINCT FROM
             (SELECT array_agg(u::text ORDER BY u::text)
              FROM source_writes.updates(NULL::w) u WHERE u.ts >= b.ts) AS same_log
      FROM source_writes.batches b WHERE b.source = 'w'::regclass) c;
SELECT count(*) FILTER (WHERE NOT same_contents) AS as_of_mismatches
FROM (SELECT (SELECT array_agg(r ORDER BY r) FROM w_as_of(b.ts) r)
             IS NOT DISTINCT FROM
             (SELECT array_agg(d ORDER BY d) FROM
                (SELECT (data)::text AS d, sum(diff) AS n
                 FROM source_writes.updates(NULL::w) WHERE ts <= b.ts GROUP BY 1) u,
                generate_series(1, u.n)) AS same_contents
      FROM source_writes.batches b WHERE b.source = 'w'::regclass) c;

DROP FUNCTION w_as_of(bigint);
DROP FUNCTION outside_written_blocks(regclass, boolean);
DROP FUNCTION plan_has(text, text);
DROP TABLE w_plain, workload_stats;
DROP PROCEDURE run_workload(int);
DROP FUNCTION random_statement();
DROP SERVER kafka CASCADE;
