--
-- retain_raw: each row ingested from a message keeps the message as it
-- came, in hidden columns that only tables with the option have: a Kafka
-- message's key, value, timestamp and headers ("$key", "$value",
-- "$timestamp", "$header_names", "$header_values"), a webhook delivery's
-- piece of the body ("$value").  raw_messages() reads them.  Messages come
-- in here through retry_errors(), which ingests kept errors as a worker
-- ingests messages; the workers' own paths are in TAP test 073.
--
CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;

CREATE ROLE regress_raw_owner;
CREATE ROLE regress_raw_reader;
CREATE ROLE regress_raw_one_column;
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
GRANT USAGE ON FOREIGN SERVER kafka, hooks TO regress_raw_owner;
CREATE SCHEMA r AUTHORIZATION regress_raw_owner;
GRANT USAGE ON SCHEMA r TO regress_raw_reader, regress_raw_one_column;
SET search_path = r, public;

-- the hidden columns of a source's heaps
CREATE FUNCTION r.hidden(t regclass) RETURNS TABLE (heap text, columns text)
LANGUAGE sql AS $$
  SELECT h.heap, string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod),
                            ', ' ORDER BY a.attnum)
  FROM source_writes.source_tables s,
       LATERAL (VALUES ('current', s.current_rel), ('history', s.history_rel)) h(heap, rel)
  JOIN pg_attribute a ON a.attrelid = h.rel AND a.attnum > 0 AND NOT a.attisdropped
  WHERE s.relid = t
  GROUP BY h.heap ORDER BY h.heap
$$;

-- kept errors of a Kafka source, to be ingested by retry_errors()
CREATE FUNCTION r.keep(t regclass, off bigint, key bytea, value bytea, ts bigint,
                       names text[] DEFAULT NULL, hvalues bytea[] DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error,
                                    "timestamp", header_names, header_values)
  VALUES (t, 0, 0, off, key, value, 'kept by the test', ts, names, hvalues)
$$;

-- the option takes a boolean, on Kafka and webhook tables
SET ROLE regress_raw_owner;
CREATE FOREIGN TABLE bad (id int) SERVER kafka OPTIONS (topic 'bad', retain_raw 'maybe');
CREATE FOREIGN TABLE plain (id int, v text) SERVER kafka OPTIONS (topic 'plain');
CREATE FOREIGN TABLE raw (id int, v text) SERVER kafka OPTIONS (topic 'raw', retain_raw 'true');
CREATE FOREIGN TABLE bin (b bytea) SERVER kafka
  OPTIONS (topic 'bin', format 'bytes', retain_raw 'on');
CREATE FOREIGN TABLE hook (id int, v text) SERVER hooks OPTIONS (retain_raw 'true');
CREATE FOREIGN TABLE hook_plain (id int) SERVER hooks;
RESET ROLE;

-- without the option, no column of ours more than before: a Kafka heap
-- has no column that can be null, so its rows have no null bitmap
SELECT * FROM hidden('plain');
SELECT * FROM hidden('hook_plain');
-- with it, the raw message's columns before "$batch"
SELECT * FROM hidden('raw');
SELECT * FROM hidden('hook');

-- messages as they came: a null key, binary values, headers with a null
-- value and a repeated name, no timestamp
SELECT keep('raw', 10, NULL, convert_to('{"id": 1, "v": "one"}', 'UTF8'), 1700000000001,
            ARRAY['trace', 'empty', 'trace'], ARRAY['\x00ff'::bytea, NULL, '\x'::bytea]);
SELECT keep('raw', 11, '\x01'::bytea, convert_to('{"id": 2, "v": "two"}', 'UTF8'), NULL);
SELECT keep('bin', 0, '\xfffe00'::bytea, '\x000102ff'::bytea, 1700000000003,
            ARRAY['h'], ARRAY[NULL::bytea]);
SELECT source_writes.retry_errors('raw') AS moved_raw,
       source_writes.retry_errors('bin') AS moved_bin;
SELECT "partition", "offset", key, convert_from(value, 'UTF8') AS value, "timestamp",
       header_names, header_values, valid_to IS NULL AS current, data
FROM source_writes.raw_messages(NULL::raw) ORDER BY "offset";
SELECT "offset", key, value, "timestamp", header_names, header_values, data
FROM source_writes.raw_messages(NULL::bin);

-- a person's rows keep none: an INSERT, and the new version of an UPDATE;
-- the version an UPDATE retracts keeps its message in the history
INSERT INTO raw VALUES (3, 'typed');
UPDATE raw SET v = 'ONE' WHERE id = 1;
SELECT (data).id, (data).v, "offset", valid_to IS NULL AS current
FROM source_writes.raw_messages(NULL::raw) ORDER BY valid_from, (data).id;
SELECT (data).id, (data).v, origin, "offset"
FROM source_writes.history(NULL::raw) ORDER BY valid_from, (data).id;

-- a column added with a default: the rows the system rewrites are still
-- their messages' rows, and keep them
ALTER FOREIGN TABLE raw ADD COLUMN n int DEFAULT 7;
SELECT (data).id, (data).n, "offset", valid_to IS NULL AS current
FROM source_writes.raw_messages(NULL::raw) ORDER BY valid_from, (data).id, current;
SELECT * FROM hidden('raw');

-- turned off, the columns stay and new rows keep nothing in them
ALTER FOREIGN TABLE raw OPTIONS (SET retain_raw 'false');
SELECT * FROM hidden('raw');
SELECT keep('raw', 12, '\x02'::bytea, convert_to('{"id": 4, "v": "four"}', 'UTF8'), 1700000000004);
SELECT source_writes.retry_errors('raw') AS moved;
SELECT count(*) AS rows, count(*) FILTER (WHERE (data).id = 4) AS id_4
FROM source_writes.raw_messages(NULL::raw) WHERE valid_to IS NULL;
-- and on again, in the same columns
ALTER FOREIGN TABLE raw OPTIONS (DROP retain_raw);
ALTER FOREIGN TABLE raw OPTIONS (ADD retain_raw 'yes');
SELECT * FROM hidden('raw');
SELECT keep('raw', 13, NULL, convert_to('{"id": 5, "v": "five"}', 'UTF8'), 1700000000005);
SELECT source_writes.retry_errors('raw') AS moved;
SELECT (data).id, "offset", "timestamp" FROM source_writes.raw_messages(NULL::raw)
WHERE valid_to IS NULL ORDER BY (data).id;

-- turned on for a table that has rows: its heaps get the columns after
-- their others, its rows have none, the new ones keep theirs
SELECT test_write('plain', 'kafka', 'append', ARRAY[ROW(1, 'old')]::plain[], 0, 0);
INSERT INTO plain VALUES (2, 'typed');
ALTER FOREIGN TABLE plain OPTIONS (ADD retain_raw 'true');
SELECT * FROM hidden('plain');
SELECT keep('plain', 1, '\x6b'::bytea, convert_to('{"id": 3, "v": "new"}', 'UTF8'), 1700000000006,
            ARRAY['h'], ARRAY['\x76'::bytea]);
SELECT source_writes.retry_errors('plain') AS moved;
SELECT id, v FROM plain ORDER BY id;
SELECT "offset", key, "timestamp", header_names, header_values, data
FROM source_writes.raw_messages(NULL::plain);
-- the rows without one are edited and retracted like the others
UPDATE plain SET v = v || '!';
DELETE FROM plain WHERE id = 3;
SELECT (data).id, (data).v, "offset", valid_to IS NULL AS current
FROM source_writes.raw_messages(NULL::plain) ORDER BY valid_from, (data).id;
SELECT id, v FROM plain ORDER BY id;

-- who may read the table reads its raw messages; SELECT on one column is
-- not enough, as with history(); nor on every column (history() is then
-- readable): a message holds fields and headers no column holds, as the
-- kept errors, which need SELECT on the table too
GRANT SELECT ON raw TO regress_raw_reader;
GRANT SELECT (id) ON raw TO regress_raw_one_column;
SET ROLE regress_raw_reader;
SELECT count(*) > 0 AS reads FROM source_writes.raw_messages(NULL::raw);
SET ROLE regress_raw_one_column;
SELECT count(*) FROM source_writes.raw_messages(NULL::raw);
SELECT count(*) FROM source_writes.history(NULL::raw);
RESET ROLE;
DO $$ BEGIN
  EXECUTE (SELECT format('GRANT SELECT (%s) ON r.raw TO regress_raw_one_column',
                         string_agg(quote_ident(attname), ', '))
           FROM pg_attribute WHERE attrelid = 'r.raw'::regclass AND attnum > 0 AND NOT attisdropped);
END $$;
SET ROLE regress_raw_one_column;
SELECT count(*) > 0 AS reads_history FROM source_writes.history(NULL::raw);
SELECT count(*) FROM source_writes.raw_messages(NULL::raw);
RESET ROLE;

-- a webhook's kept error (which has no position) keeps its message once
-- retry_errors() takes it in
INSERT INTO source_writes.errors (source, ts, value, error)
VALUES ('hook', 0, '{"id": 8, "v": "retried"}', 'kept by the test');
SELECT source_writes.retry_errors('hook');
SELECT convert_from(value, 'UTF8') AS value, key, header_names, data
FROM source_writes.raw_messages(NULL::hook) WHERE (data).id = 8;

-- once it was on, its columns count against PostgreSQL's limit, also
-- when it is off: the error is ours, before the storage is touched
DO $$ BEGIN
  EXECUTE (SELECT format('CREATE FOREIGN TABLE r.wide (%s) SERVER kafka OPTIONS (topic ''wide'', retain_raw ''true'')',
                         string_agg(format('c%s int', g), ', '))
           FROM generate_series(1, 1590) g);
END $$;
ALTER FOREIGN TABLE wide OPTIONS (SET retain_raw 'false');
ALTER FOREIGN TABLE wide ADD COLUMN c1591 int;
DROP FOREIGN TABLE wide;
-- not a source table
SELECT * FROM source_writes.raw_messages(NULL::pg_class);

-- compaction deletes the history past retain_history, raw messages with it
SELECT count(*) AS retracted_with_raw FROM source_writes.raw_messages(NULL::raw)
WHERE valid_to IS NOT NULL;
ALTER FOREIGN TABLE raw OPTIONS (ADD retain_history '0');
SELECT source_writes.compact('raw') > 0 AS removed;
SELECT count(*) AS retracted_with_raw FROM source_writes.raw_messages(NULL::raw)
WHERE valid_to IS NOT NULL;
SELECT count(*) AS current_with_raw FROM source_writes.raw_messages(NULL::raw);

DROP SCHEMA r CASCADE;
DROP SERVER kafka, hooks CASCADE;
DROP ROLE regress_raw_owner, regress_raw_reader, regress_raw_one_column;
DROP FUNCTION test_write(regclass, text, text, anyarray, int, bigint);
RESET search_path;
