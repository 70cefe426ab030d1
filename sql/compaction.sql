--
-- Compaction: since follows upper - retain_history, and compacting deletes
-- the history retracted before since, so that VACUUM can give its space
-- back for reuse.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE big (id int, payload text) SERVER kafka
  OPTIONS (topic 'big', retain_history '0');
CREATE FOREIGN TABLE kept (id int) SERVER kafka OPTIONS (topic 'kept');

-- the size of a source's hidden relations, and a VACUUM of them
CREATE FUNCTION storage_size(src regclass) RETURNS bigint LANGUAGE sql AS $$
  SELECT pg_total_relation_size(current_rel) + pg_total_relation_size(history_rel)
  FROM source_writes.source_tables WHERE relid = src
$$;
CREATE FUNCTION history_rows(src regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s',
                 (SELECT history_rel FROM source_writes.source_tables WHERE relid = src))
  INTO n;
  RETURN n;
END
$$;
SELECT format('VACUUM %s, %s', current_rel, history_rel) AS vacuum_big
FROM source_writes.source_tables WHERE relid = 'big'::regclass \gset

INSERT INTO big SELECT g, repeat('x', 50) FROM generate_series(1, 100000) g;
INSERT INTO kept SELECT g FROM generate_series(1, 10) g;

-- delete 90% of the rows
DELETE FROM big WHERE id % 10 <> 0;
DELETE FROM kept WHERE id % 10 <> 0;
SELECT count(*) FROM big;
SELECT history_rows('big') AS big_history, history_rows('kept') AS kept_history;

-- with retain_history '0', since is upper: no past time is readable
SELECT since = upper AS since_is_upper FROM source_writes.frontiers('big');
SET source_writes.as_of = 0;
SELECT count(*) FROM big;
RESET source_writes.as_of;
-- kept keeps everything: since stays where the table began
SELECT since < upper AS readable FROM source_writes.frontiers('kept');

-- compacting removes the retracted history of big, none of kept's
SELECT source_writes.compact('big') AS removed_from_big,
       source_writes.compact('kept') AS removed_from_kept;
SELECT history_rows('big') AS big_history, history_rows('kept') AS kept_history;
SELECT source_writes.compact('big') AS nothing_left;
-- the current contents and the retained log are untouched
SELECT count(*), sum(id) FROM big;
SELECT count(*) AS log_of_big, sum(diff) AS consolidated
FROM source_writes.updates(NULL::big);

-- after VACUUM, inserting 90k rows reuses the space: the relations grow by
-- at most 15%
:vacuum_big;
SELECT storage_size('big') AS size_before \gset
INSERT INTO big SELECT g, repeat('x', 50) FROM generate_series(100001, 190000) g;
SELECT storage_size('big')::numeric / :size_before <= 1.15 AS grew_at_most_15_percent,
       count(*) AS rows
FROM big;

-- a longer retention keeps what is younger than it
ALTER FOREIGN TABLE kept OPTIONS (ADD retain_history '1 hour');
DELETE FROM kept;
SELECT source_writes.compact('kept') AS removed_within_the_hour;
SELECT history_rows('kept') AS kept_history;
SELECT since < upper AS past_readable FROM source_writes.frontiers('kept');

-- shortening retain_history moves since at once: a source nobody writes to
-- can be compacted to its new retention
INSERT INTO kept SELECT g FROM generate_series(1, 10) g;
DELETE FROM kept;
SELECT since < upper AS past_readable FROM source_writes.frontiers('kept');
ALTER FOREIGN TABLE kept OPTIONS (SET retain_history '0');
SELECT since = upper AS nothing_readable FROM source_writes.frontiers('kept');
SELECT source_writes.compact('kept') AS removed_at_once;
SELECT history_rows('kept') AS kept_history;

-- compacting needs the right to delete
CREATE ROLE regress_sw_reader;
GRANT SELECT ON big TO regress_sw_reader;
SET ROLE regress_sw_reader;
SELECT source_writes.compact('big');
RESET ROLE;
DROP OWNED BY regress_sw_reader;
DROP ROLE regress_sw_reader;
SELECT source_writes.compact('pg_class');

DROP SERVER kafka CASCADE;
