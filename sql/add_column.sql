--
-- ALTER FOREIGN TABLE ... ADD COLUMN gives a source's current rows what a
-- plain table's rows get: the default (a volatile one evaluated for each
-- row), the generated value, the identity's next values, the domain's
-- default.  The change is a batch of origin 'system' in the log, which
-- retracts each row and adds its new version: the log still consolidates
-- to the table, and reads of earlier times show the rows as they were,
-- without a value in the new column.  Each case runs beside a plain table.
--
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');

-- How many rows two tables do not have in common (0: the same rows).
CREATE FUNCTION differences(a regclass, b regclass) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((TABLE %1$s EXCEPT ALL TABLE %2$s)
                                         UNION ALL (TABLE %2$s EXCEPT ALL TABLE %1$s)) d',
                 a, b) INTO n;
  RETURN n;
END
$$;

-- The log of a source: does it consolidate to the table's contents, never
-- take a row below zero, and give, consolidated up to each batch, what a
-- read as of that batch's time gives?
CREATE FUNCTION log_check(src regclass, OUT consolidates boolean,
                          OUT never_negative boolean, OUT as_of_matches boolean)
LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
  n bigint;
  consolidated text := format(
    'SELECT (u.data).* FROM (SELECT data, sum(diff) AS n
                             FROM source_writes.updates(NULL::%s, until => $1 + 1)
                             GROUP BY data) u,
                            generate_series(1, u.n)', src);
BEGIN
  EXECUTE format('SELECT count(*) FROM ((TABLE %1$s EXCEPT ALL %2$s)
                                         UNION ALL (%2$s EXCEPT ALL TABLE %1$s)) d',
                 src, consolidated) INTO n USING NULL::bigint;
  consolidates := n = 0;
  EXECUTE format('SELECT coalesce(min(running), 0) >= 0 FROM
                    (SELECT sum(diff) OVER (PARTITION BY data ORDER BY ts, diff DESC) AS running
                     FROM source_writes.updates(NULL::%s)) r', src) INTO never_negative;
  as_of_matches := true;
  FOR t IN SELECT ts FROM source_writes.batches WHERE source = src ORDER BY ts
  LOOP
    PERFORM set_config('source_writes.as_of', t::text, true);
    EXECUTE format('SELECT count(*) FROM ((TABLE %1$s EXCEPT ALL %2$s)
                                           UNION ALL (%2$s EXCEPT ALL TABLE %1$s)) d',
                   src, consolidated) INTO n USING t;
    as_of_matches := as_of_matches AND n = 0;
  END LOOP;
  PERFORM set_config('source_writes.as_of', '', true);
END
$$;

-- The log, with each batch's timestamp as its rank (1 = first batch).
CREATE FUNCTION ranked_log(src anyelement)
RETURNS TABLE (batch bigint, diff int, origin text, role text, data text)
LANGUAGE sql AS $$
  SELECT dense_rank() OVER (ORDER BY u.ts), u.diff, u.origin,
         CASE WHEN u.role = (SELECT rolname FROM pg_roles WHERE oid = 10)
              THEN '(superuser)' ELSE u.role::text END,
         u.data::text
  FROM source_writes.updates(src) u
  ORDER BY 1, 2 DESC, 5
$$;

CREATE FOREIGN TABLE src (a int, note text) SERVER hooks;
CREATE TABLE pln (a int, note text);
INSERT INTO src VALUES (1, 'one'), (2, 'two'), (3, NULL);
INSERT INTO pln VALUES (1, 'one'), (2, 'two'), (3, NULL);
SELECT upper - 1 AS before_alter FROM source_writes.frontiers('src') \gset

-- a constant default: every existing row gets it
ALTER FOREIGN TABLE src ADD COLUMN d text DEFAULT 'dflt';
ALTER TABLE pln ADD COLUMN d text DEFAULT 'dflt';
SELECT * FROM src ORDER BY a;
SELECT differences('src', 'pln');
-- in the log: one system batch, by the role that altered the table, that
-- retracts each row and adds it with its new value
SELECT * FROM ranked_log(NULL::src);
-- as of before the ALTER the rows were as they were then
SET source_writes.as_of = :before_alter;
SELECT * FROM src ORDER BY a;
RESET source_writes.as_of;

-- NOT NULL with a default (failed on non-empty sources before)
ALTER FOREIGN TABLE src ADD COLUMN n int NOT NULL DEFAULT 0;
ALTER TABLE pln ADD COLUMN n int NOT NULL DEFAULT 0;
SELECT differences('src', 'pln');

-- volatile defaults are evaluated for each row
ALTER FOREIGN TABLE src ADD COLUMN r float8 DEFAULT random(),
                        ADD COLUMN t timestamptz DEFAULT clock_timestamp();
ALTER TABLE pln ADD COLUMN r float8 DEFAULT random(),
                ADD COLUMN t timestamptz DEFAULT clock_timestamp();
SELECT 'src' AS tbl, count(*), count(DISTINCT r) AS distinct_r, count(t) AS with_t FROM src
UNION ALL
SELECT 'pln', count(*), count(DISTINCT r), count(t) FROM pln;
ALTER FOREIGN TABLE src DROP COLUMN r, DROP COLUMN t;
ALTER TABLE pln DROP COLUMN r, DROP COLUMN t;
SELECT differences('src', 'pln');

-- a generated column, and an identity numbered in the heap's order; a
-- generated column sees a default added with it
ALTER FOREIGN TABLE src ADD COLUMN g int GENERATED ALWAYS AS (a * 10) STORED;
ALTER TABLE pln ADD COLUMN g int GENERATED ALWAYS AS (a * 10) STORED;
ALTER FOREIGN TABLE src ADD COLUMN id int GENERATED ALWAYS AS IDENTITY;
ALTER TABLE pln ADD COLUMN id int GENERATED ALWAYS AS IDENTITY;
ALTER FOREIGN TABLE src ADD COLUMN x int DEFAULT 5,
                        ADD COLUMN y int GENERATED ALWAYS AS (x + a) STORED;
ALTER TABLE pln ADD COLUMN x int DEFAULT 5,
                ADD COLUMN y int GENERATED ALWAYS AS (x + a) STORED;
SELECT * FROM src ORDER BY a;
SELECT differences('src', 'pln');
-- new rows get the next identities, as in the plain table
INSERT INTO src (a) VALUES (4);
INSERT INTO pln (a) VALUES (4);
SELECT differences('src', 'pln');

-- a domain's default, and a domain's NOT NULL that the rows would break
CREATE DOMAIN seven AS int DEFAULT 7 CHECK (VALUE > 0);
CREATE DOMAIN required AS int NOT NULL;
ALTER FOREIGN TABLE src ADD COLUMN s seven;
ALTER TABLE pln ADD COLUMN s seven;
SELECT differences('src', 'pln');
SELECT count(*) AS batches_before FROM source_writes.batches WHERE source = 'src'::regclass \gset
ALTER FOREIGN TABLE src ADD COLUMN q required;
ALTER TABLE pln ADD COLUMN q required;
-- a default or generated value that fails fails the ALTER, and changes
-- nothing
ALTER FOREIGN TABLE src ADD COLUMN z int DEFAULT 1 / (random() * 0)::int;
ALTER TABLE pln ADD COLUMN z int DEFAULT 1 / (random() * 0)::int;
ALTER FOREIGN TABLE src ADD COLUMN z int GENERATED ALWAYS AS (1 / (a - 2)) STORED;
ALTER TABLE pln ADD COLUMN z int GENERATED ALWAYS AS (1 / (a - 2)) STORED;

-- no default, or a null one: the rows are left alone, and the log too
ALTER FOREIGN TABLE src ADD COLUMN e text, ADD COLUMN e2 text DEFAULT NULL;
ALTER TABLE pln ADD COLUMN e text, ADD COLUMN e2 text DEFAULT NULL;
SELECT count(*) - :batches_before AS new_batches
FROM source_writes.batches WHERE source = 'src'::regclass;
SELECT differences('src', 'pln');
-- dropping a column leaves the log consistent too
ALTER FOREIGN TABLE src DROP COLUMN note;
ALTER TABLE pln DROP COLUMN note;
SELECT differences('src', 'pln');
SELECT * FROM log_check('src');
-- a column whose value a person then sets is an ordinary edit
UPDATE src SET e = 'edited' WHERE a = 1;
UPDATE pln SET e = 'edited' WHERE a = 1;
SELECT * FROM log_check('src');

-- the rows get their values without firing the table's triggers, as a
-- plain table's rewrite fires none
CREATE FUNCTION say() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE '% % of %', TG_WHEN, TG_OP, TG_TABLE_NAME;
  RETURN NEW;
END
$$;
CREATE TRIGGER say BEFORE UPDATE ON src FOR EACH ROW EXECUTE FUNCTION say();
CREATE TRIGGER say BEFORE UPDATE ON pln FOR EACH ROW EXECUTE FUNCTION say();
ALTER FOREIGN TABLE src ADD COLUMN silent int DEFAULT 1;
ALTER TABLE pln ADD COLUMN silent int DEFAULT 1;
SELECT differences('src', 'pln');

-- an upsert source: its key still holds, and its log is consistent
CREATE FOREIGN TABLE kv (k text, v int) SERVER kafka
  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
CREATE TABLE kv_plain (k text PRIMARY KEY, v int);
INSERT INTO kv VALUES ('a', 1), ('b', 2);
INSERT INTO kv_plain VALUES ('a', 1), ('b', 2);
ALTER FOREIGN TABLE kv ADD COLUMN seen boolean NOT NULL DEFAULT true;
ALTER TABLE kv_plain ADD COLUMN seen boolean NOT NULL DEFAULT true;
SELECT * FROM kv ORDER BY k;
SELECT differences('kv', 'kv_plain');
INSERT INTO kv VALUES ('a', 10);
UPDATE kv SET v = 20 WHERE k = 'b';
UPDATE kv_plain SET v = 20 WHERE k = 'b';
SELECT differences('kv', 'kv_plain');
SELECT * FROM log_check('kv');

DROP TABLE pln, kv_plain;
DROP SERVER hooks CASCADE;
DROP SERVER kafka CASCADE;
DROP FUNCTION say();
DROP DOMAIN seven;
DROP DOMAIN required;
DROP FUNCTION differences(regclass, regclass), log_check(regclass), ranked_log(anyelement);
