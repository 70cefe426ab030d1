--
-- Security: what other roles can learn about source tables, and what they
-- can make a superuser run.  (Options that name files or load code are
-- tested in options.sql and the TAP test 010_option_security.pl.)
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE FOREIGN TABLE secrets (id int, v text) SERVER kafka OPTIONS (topic 'secrets');
CREATE FOREIGN TABLE open_data (id int) SERVER kafka OPTIONS (topic 'open_data');
INSERT INTO secrets VALUES (1, 'x');
INSERT INTO open_data VALUES (1);
CREATE ROLE regress_sw_mallory;
GRANT SELECT ON open_data TO regress_sw_mallory;

-- the catalog is the extension's; a role sees only the sources it may read
SET ROLE regress_sw_mallory;
SELECT count(*) FROM source_writes.source_tables;
SELECT count(*) FROM source_writes.batches;
SELECT source, kind, since < upper AS readable FROM source_writes.sources ORDER BY source::text;
SELECT * FROM source_writes.frontiers('secrets');
SELECT * FROM source_writes.updates(NULL::secrets);
RESET ROLE;
SELECT source, kind FROM source_writes.sources ORDER BY source::text;

-- a view, or a SECURITY DEFINER function, over a source shows its current
-- rows with its owner's rights; reading the past through it needs SELECT
-- on the table itself
SELECT upper - 1 AS t_with_x FROM source_writes.frontiers('secrets') \gset
DELETE FROM secrets;
CREATE VIEW secret_ids AS SELECT id FROM secrets;
CREATE FUNCTION secret_count() RETURNS bigint LANGUAGE sql SECURITY DEFINER
  AS 'SELECT count(*) FROM public.secrets';
GRANT SELECT ON secret_ids TO regress_sw_mallory;
GRANT EXECUTE ON FUNCTION secret_count() TO regress_sw_mallory;
SET ROLE regress_sw_mallory;
SELECT * FROM secret_ids;
SELECT secret_count();
SET source_writes.as_of = :t_with_x;
SELECT * FROM secret_ids;
SELECT secret_count();
SET source_writes.as_of = 1;
SELECT * FROM secret_ids;
RESET source_writes.as_of;
RESET ROLE;
SET source_writes.as_of = :t_with_x;
SELECT * FROM secret_ids;
RESET source_writes.as_of;
DROP VIEW secret_ids;
DROP FUNCTION secret_count();

-- The event triggers run whenever anybody runs DDL, with that role's
-- search_path.  A role that can put an operator first on a superuser's
-- path must not get it run by them.
CREATE ROLE regress_sw_alice;
CREATE SCHEMA alice_s AUTHORIZATION regress_sw_alice;
CREATE TABLE alice_ran (who name);
GRANT INSERT ON alice_ran TO PUBLIC;
SET ROLE regress_sw_alice;
CREATE FUNCTION alice_s.evil(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.alice_ran VALUES (current_user);
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE FUNCTION alice_s.evil(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.alice_ran VALUES (current_user);
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR alice_s.= (LEFTARG = text, RIGHTARG = text, FUNCTION = alice_s.evil);
CREATE OPERATOR alice_s.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = alice_s.evil);
CREATE FUNCTION alice_s.pg_event_trigger_dropped_objects() RETURNS SETOF record
  LANGUAGE sql AS 'SELECT 1';
RESET ROLE;
SET search_path = alice_s, pg_catalog, public;
CREATE FOREIGN TABLE public.victim (id int) SERVER kafka OPTIONS (topic 'victim');
ALTER FOREIGN TABLE public.victim ADD COLUMN v text;
DROP FOREIGN TABLE public.victim;
CREATE TABLE public.unrelated (id int);
DROP TABLE public.unrelated;
RESET search_path;
SELECT count(*) AS alice_code_ran FROM alice_ran;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sw_alice';

DROP SCHEMA alice_s CASCADE;
DROP TABLE alice_ran;
DROP OWNED BY regress_sw_mallory;
DROP ROLE regress_sw_alice, regress_sw_mallory;
DROP SERVER kafka CASCADE;
