--
-- Lifecycle: the hidden storage of source tables follows CREATE, ALTER and
-- DROP; failed commands leave nothing behind.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');

-- Everything the extension keeps for source tables: its internal relations
-- (named here after the table they belong to, not by OID and tag, with the
-- bootstrap superuser, whose name varies, shown as such), whether each
-- hidden heap depends internally on its table, and catalog rows.
CREATE VIEW storage AS
SELECT regexp_replace(c.relname, '_[0-9]+_[0-9a-f]{8}', '') || ' of ' ||
         coalesce(st.relid::text, '(no table)') AS hidden_relation,
       CASE WHEN c.relowner = 10 THEN '(superuser)'
            ELSE c.relowner::regrole::text END AS owner,
       EXISTS (SELECT FROM pg_depend d
               WHERE d.classid = 'pg_class'::regclass
                 AND d.objid = coalesce(i.indrelid, c.oid)
                 AND d.refobjid = st.relid AND d.deptype = 'i') AS dependent
FROM pg_class c
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN source_writes.source_tables st
       ON coalesce(i.indrelid, c.oid) IN (st.current_rel, st.history_rel)
WHERE c.relnamespace = 'source_writes_internal'::regnamespace
UNION ALL
SELECT 'catalog row of ' || st.relid::text || ' without storage', NULL, NULL
FROM source_writes.source_tables st
WHERE NOT EXISTS (SELECT FROM pg_class WHERE oid = st.current_rel)
   OR NOT EXISTS (SELECT FROM pg_class WHERE oid = st.history_rel)
ORDER BY 1;

-- The columns of a source table's hidden relations.
CREATE FUNCTION hidden_columns(src regclass)
RETURNS TABLE (relation text, columns text) LANGUAGE sql AS $$
  SELECT r.name, string_agg(format('%s %s', quote_ident(a.attname),
                                   format_type(a.atttypid, a.atttypmod)),
                            ', ' ORDER BY a.attnum)
  FROM source_writes.source_tables st
  CROSS JOIN LATERAL (VALUES ('current', st.current_rel),
                             ('history', st.history_rel)) AS r(name, rel)
  JOIN pg_attribute a ON a.attrelid = r.rel AND a.attnum > 0 AND NOT a.attisdropped
  WHERE st.relid = src
  GROUP BY r.name ORDER BY r.name
$$;

-- Are the hidden relations in step with the table?  Our own columns left
-- out ("$part", "$pos", "$delivery" for webhooks, "$batch", and
-- "$retracted" in the history), column k of a hidden relation is column k
-- of the table: same name and type (a domain's base type), dropped or not.
CREATE FUNCTION in_step(src regclass) RETURNS boolean LANGUAGE sql AS $$
  WITH hidden AS (
    SELECT r.rel, r.nmeta + (st.kind = 'webhook')::int AS nmeta
    FROM source_writes.source_tables st
    CROSS JOIN LATERAL (VALUES (st.current_rel, 3), (st.history_rel, 4)) AS r(rel, nmeta)
    WHERE st.relid = src),
  ours AS (
    SELECT a.attrelid, a.attnum FROM hidden
    JOIN pg_attribute a ON a.attrelid = hidden.rel AND NOT a.attisdropped
     AND a.attname IN ('$part', '$pos', '$delivery', '$batch', '$retracted')),
  theirs AS (
    SELECT a.*, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS k
    FROM hidden JOIN pg_attribute a ON a.attrelid = hidden.rel AND a.attnum > 0
    WHERE (a.attrelid, a.attnum) NOT IN (SELECT * FROM ours))
  SELECT bool_and(h.attisdropped = f.attisdropped AND
                  (f.attisdropped OR (h.attname = f.attname AND
                                      h.atttypid = coalesce(nullif(t.typbasetype, 0), f.atttypid) AND
                                      h.atttypmod = CASE WHEN t.typtype = 'd' THEN t.typtypmod
                                                         ELSE f.atttypmod END AND
                                      h.attcollation = f.attcollation)))
         AND count(*) = (SELECT 2 * count(*) FROM pg_attribute
                         WHERE attrelid = src AND attnum > 0)
         AND (SELECT bool_and((SELECT count(*) FROM ours WHERE attrelid = hidden.rel) = hidden.nmeta
                              AND (SELECT count(*) FROM theirs WHERE attrelid = hidden.rel)
                                  = (SELECT count(*) FROM pg_attribute WHERE attrelid = src AND attnum > 0))
              FROM hidden)
  FROM theirs h
  JOIN pg_attribute f ON f.attrelid = src AND f.attnum = h.k
  LEFT JOIN pg_type t ON t.oid = f.atttypid
$$;

-- Put rows into a source table: rows is a JSON array of objects keyed by
-- column name.
CREATE FUNCTION put_rows(src regclass, rows json) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('INSERT INTO %s SELECT * FROM json_populate_recordset(NULL::%s, %L)',
                 src, src, rows);
END
$$;

-- ... and take them out again, behind the log's back, to set up a test
CREATE FUNCTION remove_rows(src regclass, condition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %s WHERE %s',
                 (SELECT current_rel FROM source_writes.source_tables WHERE relid = src),
                 condition);
END
$$;

SELECT * FROM storage;

--
-- CREATE
--
CREATE FOREIGN TABLE events (id int, kind text, payload jsonb,
                             off bigint OPTIONS (source 'offset'))
  SERVER kafka OPTIONS (topic 'events');
CREATE FOREIGN TABLE calls (body jsonb OPTIONS (source 'body'),
                            at timestamptz OPTIONS (source 'received_at'))
  SERVER hooks;
SELECT * FROM storage;
SELECT relid, kind, upper = since AS empty_range,
       upper BETWEEN (extract(epoch FROM now()) * 1000)::bigint - 600000
                 AND (extract(epoch FROM now()) * 1000)::bigint + 600000 AS upper_is_now
FROM source_writes.source_tables ORDER BY relid::text;
SELECT * FROM hidden_columns('events');
SELECT in_step('events'), in_step('calls');

-- a failed or rolled back CREATE leaves nothing
CREATE FOREIGN TABLE broken (id int OPTIONS (source 'offset')) SERVER kafka
  OPTIONS (topic 'broken');
BEGIN;
CREATE FOREIGN TABLE later (id int) SERVER kafka OPTIONS (topic 'later');
SELECT count(*) FROM storage;
ROLLBACK;
SELECT * FROM storage;

-- source tables cannot be temporary (a session's end would leave their
-- log behind, and the workers cannot see them): refused, leaving nothing
CREATE FOREIGN TABLE pg_temp.scratch (id int) SERVER kafka OPTIONS (topic 'scratch');
CREATE FOREIGN TABLE pg_temp.scratch_hook (body text OPTIONS (source 'body')) SERVER hooks;
SELECT * FROM storage;
SELECT count(*) FROM pg_class WHERE relname LIKE 'scratch%';

-- foreign tables of other wrappers are none of our business
CREATE FOREIGN DATA WRAPPER other_fdw;
CREATE SERVER other FOREIGN DATA WRAPPER other_fdw;
CREATE FOREIGN TABLE elsewhere (id int) SERVER other;
ALTER FOREIGN TABLE elsewhere ADD COLUMN x int;
SELECT count(*) FROM storage;
DROP FOREIGN DATA WRAPPER other_fdw CASCADE;

--
-- ALTER: columns
--
SELECT put_rows('events', '[{"id": 1, "kind": "a", "payload": {"n": 1}, "off": 10},
                            {"id": 2, "kind": "b", "payload": null, "off": 11},
                            {"id": 3, "kind": "42", "payload": {"n": 3}, "off": 12}]');
ALTER FOREIGN TABLE events ADD COLUMN note text, DROP COLUMN payload;
ALTER FOREIGN TABLE events RENAME COLUMN kind TO category;
ALTER TABLE events RENAME COLUMN note TO remark;
SELECT * FROM hidden_columns('events');
SELECT in_step('events');
SELECT * FROM events ORDER BY id;

-- types: the stored rows follow as a plain table's rows would, through an
-- assignment cast, in both relations
ALTER FOREIGN TABLE events ALTER COLUMN id TYPE bigint;
ALTER FOREIGN TABLE events ALTER COLUMN remark TYPE varchar(20);
SELECT * FROM hidden_columns('events');
SELECT in_step('events');
SELECT * FROM events ORDER BY id;

-- a value that does not fit the new type is an error, not cut short; a
-- change that a plain table could only make with USING (which foreign
-- tables do not take) is refused: nothing changes
ALTER FOREIGN TABLE events ALTER COLUMN category TYPE varchar(1);
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE events ALTER COLUMN category TYPE int;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE events ALTER COLUMN id TYPE point;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hidden_columns('events');
SELECT * FROM events ORDER BY id;
-- the history counts as much as the current rows: a value only the log
-- still has stops the change, and the log keeps it
SELECT remove_rows('events', $$category !~ '^[0-9]+$'$$);
ALTER FOREIGN TABLE events ALTER COLUMN category TYPE varchar(2);
SELECT put_rows('events', '[{"id": 4, "category": "7", "off": 13}]');
DELETE FROM events WHERE category = '42';
ALTER FOREIGN TABLE events ALTER COLUMN category TYPE varchar(1);
\echo :LAST_ERROR_SQLSTATE
SELECT diff, (data).category FROM source_writes.updates(NULL::events)
ORDER BY ts, diff DESC, (data).id;
SELECT * FROM events ORDER BY id;
SELECT in_step('events');

-- several changes in one command
ALTER FOREIGN TABLE events ADD COLUMN a int, ADD COLUMN b text, DROP COLUMN remark,
  ALTER COLUMN category TYPE text, ALTER COLUMN id TYPE numeric;
SELECT * FROM hidden_columns('events');
SELECT in_step('events');

-- reserved names and the table's own rules still hold
ALTER FOREIGN TABLE events ADD COLUMN "$batch" int;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE events ALTER COLUMN off TYPE int;
\echo :LAST_ERROR_SQLSTATE
SELECT in_step('events');

--
-- ALTER: names, schema, owner
--
CREATE SCHEMA elsewhere;
ALTER FOREIGN TABLE events RENAME TO happenings;
ALTER FOREIGN TABLE happenings SET SCHEMA elsewhere;
SELECT * FROM storage;
SELECT id, category, off FROM elsewhere.happenings ORDER BY id;
ALTER FOREIGN TABLE elsewhere.happenings SET SCHEMA public;
ALTER FOREIGN TABLE happenings RENAME TO events;

CREATE ROLE regress_sw_owner;
ALTER FOREIGN TABLE events OWNER TO regress_sw_owner;
SELECT * FROM storage;
-- the new owner's later changes run as that owner
SET ROLE regress_sw_owner;
ALTER FOREIGN TABLE events ADD COLUMN c date;
RESET ROLE;
SELECT in_step('events');

--
-- the upsert key follows renames and cannot lose a column
--
CREATE FOREIGN TABLE prices (sku text, region text, price numeric)
  SERVER kafka OPTIONS (topic 'prices', envelope 'upsert', key 'region, sku');
ALTER FOREIGN TABLE prices RENAME COLUMN sku TO "Article";
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'prices'::regclass;
ALTER FOREIGN TABLE prices DROP COLUMN region;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE prices OPTIONS (SET key '"Article"');
ALTER FOREIGN TABLE prices DROP COLUMN region;
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'prices'::regclass;
SELECT in_step('prices');

-- the key's unique index follows the key option and the key's type
SELECT * FROM storage WHERE hidden_relation LIKE '%prices';
ALTER FOREIGN TABLE prices ALTER COLUMN "Article" TYPE varchar(40);
SELECT indexrelid::regclass IS NOT NULL AS has_key_index,
       pg_get_indexdef(indexrelid) ~ 'USING btree \("Article"\)$' AS on_article
FROM pg_index WHERE indisunique
  AND indrelid = (SELECT current_rel FROM source_writes.source_tables
                  WHERE relid = 'prices'::regclass);
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'none', DROP key);
SELECT * FROM storage WHERE hidden_relation LIKE '%prices';
ALTER FOREIGN TABLE prices ADD COLUMN spot point;
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'upsert', ADD key 'spot');
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'upsert', ADD key 'price, "Article"');
SELECT * FROM storage WHERE hidden_relation LIKE '%prices';

--
-- inheritance: a change to a partitioned parent reaches its source partitions
--
CREATE TABLE readings (sensor text, value float8) PARTITION BY LIST (sensor);
CREATE FOREIGN TABLE readings_kafka PARTITION OF readings FOR VALUES IN ('k')
  SERVER kafka OPTIONS (topic 'readings');
ALTER TABLE readings ADD COLUMN unit text;
ALTER TABLE readings RENAME COLUMN value TO reading;
SELECT * FROM hidden_columns('readings_kafka');
SELECT in_step('readings_kafka');

--
-- tables made while the event triggers were off get storage at their next
-- ALTER, and the hidden columns line up with any columns dropped meanwhile
--
ALTER EVENT TRIGGER source_writes_ddl_command_end DISABLE;
CREATE FOREIGN TABLE unseen (a int, b int) SERVER kafka OPTIONS (topic 'unseen');
ALTER FOREIGN TABLE unseen DROP COLUMN a;
ALTER EVENT TRIGGER source_writes_ddl_command_end ENABLE;
SELECT * FROM unseen;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE unseen ADD COLUMN c int;
SELECT * FROM hidden_columns('unseen');
SELECT in_step('unseen');
SELECT * FROM unseen;

--
-- a source table created with check_function_bodies off, as a restore does,
-- gets no storage (the restore brings it with the extension's catalog);
-- constraints that a dump adds after creating it find no rows to check;
-- an ALTER with the setting on gives it new, empty storage
--
SET check_function_bodies = off;
CREATE FOREIGN TABLE restored (id int NOT NULL, v text CHECK (v <> ''))
  SERVER kafka OPTIONS (topic 'restored');
ALTER FOREIGN TABLE restored ALTER COLUMN v SET NOT NULL;
ALTER FOREIGN TABLE restored ADD CONSTRAINT positive_id CHECK (id > 0);
ALTER FOREIGN TABLE restored ADD CONSTRAINT short_v CHECK (length(v) < 9) NOT VALID;
SELECT count(*) FROM source_writes.source_tables WHERE relid = 'restored'::regclass;
SELECT * FROM restored;
RESET check_function_bodies;
ALTER FOREIGN TABLE restored ALTER COLUMN v SET DEFAULT 'x';
SELECT count(*) FROM source_writes.source_tables WHERE relid = 'restored'::regclass;
INSERT INTO restored (id) VALUES (1);
SELECT * FROM restored;
DROP FOREIGN TABLE restored;

--
-- storage out of step: DDL that the event triggers do not see (here under
-- session_replication_role = replica) leaves the hidden relations behind
-- the table; reads and writes then refuse with a hint, rather than read
-- the stored bytes as the wrong type, until an ALTER brings them in step
--
CREATE FOREIGN TABLE drifted (a int, b text) SERVER kafka OPTIONS (topic 'drifted');
INSERT INTO drifted VALUES (1, 'hello'), (2, 'world');
SET session_replication_role = replica;
ALTER FOREIGN TABLE drifted ALTER COLUMN a TYPE text;
RESET session_replication_role;
SELECT * FROM drifted;
INSERT INTO drifted VALUES ('3', 'again');
UPDATE drifted SET b = 'changed';
SELECT count(*) FROM source_writes.updates(NULL::drifted);
ALTER FOREIGN TABLE drifted ALTER COLUMN a TYPE text;
SELECT * FROM drifted ORDER BY a;
SET session_replication_role = replica;
ALTER FOREIGN TABLE drifted ADD COLUMN c int;
RESET session_replication_role;
SELECT * FROM drifted;
ALTER FOREIGN TABLE drifted ALTER COLUMN c TYPE int;
SELECT * FROM drifted ORDER BY a;
SELECT in_step('drifted');
DROP FOREIGN TABLE drifted;

--
-- a table becomes an upsert source only if its current rows have complete,
-- distinct keys
--
CREATE FOREIGN TABLE keyed (k text, k2 int, v int) SERVER kafka OPTIONS (topic 'keyed');
INSERT INTO keyed VALUES (NULL, 1, 1), ('a', NULL, 2), ('b', 1, 3), ('b', 1, 4);
ALTER FOREIGN TABLE keyed OPTIONS (ADD envelope 'upsert', ADD key 'k');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM keyed WHERE k IS NULL;
ALTER FOREIGN TABLE keyed OPTIONS (ADD envelope 'upsert', ADD key 'k');
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE keyed OPTIONS (ADD envelope 'upsert', ADD key 'k, k2');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM keyed WHERE v = 4;
ALTER FOREIGN TABLE keyed OPTIONS (ADD envelope 'upsert', ADD key 'k');
SELECT * FROM keyed ORDER BY k;
SELECT * FROM storage WHERE hidden_relation LIKE '%keyed';
DROP FOREIGN TABLE keyed;

--
-- domains: a source table's current rows are held to its columns' domains
-- as a plain table's rows are, with the same errors naming the table; its
-- history, the past, is not rewritten
--
CREATE DOMAIN posint AS int;
CREATE FOREIGN TABLE dom (x posint, y int) SERVER kafka OPTIONS (topic 'dom');
CREATE TABLE dom_plain (x posint, y int);
INSERT INTO dom VALUES (-5, 1);
INSERT INTO dom_plain VALUES (-5, 1);
UPDATE dom SET x = 5;
UPDATE dom_plain SET x = 5;
ALTER DOMAIN posint ADD CONSTRAINT positive CHECK (VALUE > 0);
INSERT INTO dom VALUES (-1, 2);
\echo :LAST_ERROR_SQLSTATE
ALTER DOMAIN posint ADD CONSTRAINT small CHECK (VALUE < 3);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE dom_plain;
ALTER DOMAIN posint ADD CONSTRAINT small CHECK (VALUE < 3);
\echo :LAST_ERROR_SQLSTATE
ALTER DOMAIN posint ADD CONSTRAINT small CHECK (VALUE < 3) NOT VALID;
ALTER DOMAIN posint VALIDATE CONSTRAINT small;
\echo :LAST_ERROR_SQLSTATE
ALTER DOMAIN posint DROP CONSTRAINT small;
INSERT INTO dom VALUES (NULL, 3);
ALTER DOMAIN posint SET NOT NULL;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM dom WHERE x IS NULL;
ALTER DOMAIN posint SET NOT NULL;
SELECT diff, data FROM source_writes.updates(NULL::dom) ORDER BY ts, diff DESC;
-- ALTER DOMAIN locks only the source tables whose columns it checks, as
-- PostgreSQL locks only the tables that use the domain
BEGIN;
CREATE DOMAIN unused AS int;
ALTER DOMAIN unused ADD CONSTRAINT positive CHECK (VALUE > 0);
SELECT count(*) AS source_tables_locked FROM pg_locks
WHERE pid = pg_backend_pid() AND relation IN (SELECT relid FROM source_writes.source_tables);
ROLLBACK;
BEGIN;
ALTER DOMAIN posint ADD CONSTRAINT still_positive CHECK (VALUE > 0);
SELECT relation::regclass, mode FROM pg_locks
WHERE pid = pg_backend_pid() AND relation IN (SELECT relid FROM source_writes.source_tables);
ROLLBACK;
-- a column changed to a domain has its current rows checked against it
CREATE DOMAIN smallint_pos AS int CHECK (VALUE BETWEEN 1 AND 9);
UPDATE dom SET y = 10;
ALTER FOREIGN TABLE dom ALTER COLUMN y TYPE smallint_pos;
\echo :LAST_ERROR_SQLSTATE
UPDATE dom SET y = 9;
ALTER FOREIGN TABLE dom ALTER COLUMN y TYPE smallint_pos;
SELECT * FROM hidden_columns('dom');
SELECT in_step('dom');
DROP FOREIGN TABLE dom;
DROP DOMAIN posint, smallint_pos;

--
-- a source table's storage holds five more columns than it has, so it has
-- at most 1595 columns
--
DO $$
BEGIN
  EXECUTE format('CREATE FOREIGN TABLE widest (%s) SERVER kafka OPTIONS (topic %L)',
                 (SELECT string_agg(format('c%s int', g), ', ') FROM generate_series(1, 1595) g),
                 'widest');
  DROP FOREIGN TABLE widest;
END
$$;
DO $$
DECLARE
  detail text;
BEGIN
  EXECUTE format('CREATE FOREIGN TABLE too_wide (%s) SERVER kafka OPTIONS (topic %L)',
                 (SELECT string_agg(format('c%s int', g), ', ') FROM generate_series(1, 1596) g),
                 'too_wide');
EXCEPTION WHEN too_many_columns THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RAISE NOTICE '% (%) %', SQLERRM, SQLSTATE, detail;
END
$$;

--
-- DROP
--
-- hidden relations cannot be dropped alone
DO $$
BEGIN
  EXECUTE format('DROP TABLE %s', (SELECT current_rel FROM source_writes.source_tables
                                   WHERE relid = 'calls'::regclass));
EXCEPTION WHEN dependent_objects_still_exist THEN
  RAISE NOTICE '% (%)', regexp_replace(SQLERRM, '_[0-9]+_[0-9a-f]{8}', '_N'), SQLSTATE;
END
$$;

SELECT * FROM storage;
DROP FOREIGN TABLE calls;
SELECT * FROM storage;

-- a rolled back drop keeps everything
BEGIN;
DROP FOREIGN TABLE events;
SELECT count(*) FROM storage;
ROLLBACK;
SELECT count(*) FROM storage;
SELECT id, category FROM events ORDER BY id;

-- with the schema, the owner, the server
CREATE SCHEMA doomed;
CREATE FOREIGN TABLE doomed.t (v jsonb) SERVER hooks;
DROP SCHEMA doomed CASCADE;
DROP OWNED BY regress_sw_owner;
DROP ROLE regress_sw_owner;
SELECT * FROM storage;
DROP TABLE readings;
DROP SERVER kafka CASCADE;
SELECT * FROM storage;

--
-- DROP EXTENSION takes everything along and leaves nothing behind
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE last (v jsonb) SERVER kafka OPTIONS (topic 'last');
CREATE FOREIGN TABLE last_hook (v jsonb) SERVER hooks;
SELECT count(*) FROM storage;
-- even in a transaction that wrote a source
BEGIN;
INSERT INTO last VALUES ('{"written": "just before"}');
DROP VIEW storage;
DROP EXTENSION source_writes CASCADE;
COMMIT;
SELECT nspname FROM pg_namespace WHERE nspname LIKE 'source_writes%';
SELECT count(*) AS foreign_tables FROM pg_foreign_table;
SELECT count(*) AS servers FROM pg_foreign_server;
SELECT count(*) AS event_triggers FROM pg_event_trigger;
SELECT count(*) AS leftovers FROM pg_class WHERE relname ~ '^(current|history)_[0-9]+_[0-9a-f]{8}';
SELECT count(*) AS leftover_dependencies FROM pg_depend d
WHERE d.classid = 'pg_class'::regclass AND NOT EXISTS (SELECT FROM pg_class WHERE oid = d.objid);

-- and it comes back clean
CREATE EXTENSION source_writes;
SELECT count(*) FROM source_writes.source_tables;
