# CSV messages decode as COPY ... (FORMAT csv) reads the same bytes into a
# plain table, in databases of several encodings (UTF8, LATIN1, EUC_JP,
# SQL_ASCII: multi-byte characters never hold bytes that look like quotes,
# commas or line breaks).  Random records of quotes, doubled quotes, commas,
# CR, LF, backslashes, dots and multi-byte characters, each decoded through
# the tests' door and copied from a file: the same row, or the same error
# (the first column is a varchar(3), which long fields do not fit).
# Where the README says they differ, the test says how: a message holds one
# record (COPY's second record, or its error about one, is "more than one
# CSV record" here, and an empty value is no record), and a line \. is data
# (COPY's end of data: values with one are left out).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $per_database = 3000;
my $node = SwTest::node('csv');
my $file = PostgreSQL::Test::Utils::tempdir() . '/message.csv';

# the door, a CSV source and a plain table beside it, and what compares them
my $setup = q{
CREATE FUNCTION test_decode(src anyelement, value bytea, key bytea DEFAULT NULL,
  part int DEFAULT 0, "offset" bigint DEFAULT 0, ts timestamptz DEFAULT NULL,
  headers bytea[] DEFAULT NULL, tombstone boolean DEFAULT false)
RETURNS anyelement AS 'source_writes_test', 'source_writes_test_decode' LANGUAGE C;
CREATE SERVER k FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers '127.0.0.1:1');
CREATE FOREIGN TABLE src (a varchar(3), b text, c text) SERVER k OPTIONS (topic 'c', format 'csv');
CREATE TABLE plain (a varchar(3), b text, c text);
CREATE TABLE results (v text, decoded text, copied text);

CREATE FUNCTION show(a text, b text, c text) RETURNS text LANGUAGE sql
AS $$ SELECT 'row ' || quote_nullable(a) || '|' || quote_nullable(b) || '|' || quote_nullable(c) $$;

-- a message decoded, and copied from FILE into the plain table
CREATE FUNCTION compare(v bytea, OUT decoded text, OUT copied text) LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n int;
  lo oid;
  context text;
BEGIN
  BEGIN
    SELECT * INTO r FROM test_decode(NULL::src, v);
    decoded := show(r.a, r.b, r.c);
  EXCEPTION WHEN others THEN
    decoded := 'error ' || SQLSTATE || ' ' || SQLERRM;
  END;
  lo := lo_from_bytea(0, v);
  PERFORM lo_export(lo, 'FILE');
  PERFORM lo_unlink(lo);
  TRUNCATE plain;
  BEGIN
    EXECUTE format($c$COPY plain FROM 'FILE' (FORMAT csv, ENCODING %L)$c$, getdatabaseencoding());
    SELECT count(*) INTO n FROM plain;
    IF n = 1 THEN
      SELECT show(p.a, p.b, p.c) INTO copied FROM plain p;
    ELSE
      copied := 'rows ' || n;
    END IF;
  EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS context = PG_EXCEPTION_CONTEXT;
    copied := 'error ' || SQLSTATE || ' ' || SQLERRM
      || CASE WHEN context ~ 'COPY plain, line [2-9]' THEN ' (a later line)' ELSE '' END;
  END;
END $$;

-- random text of CSV's special characters, and a multi-byte one
CREATE FUNCTION random_text(maxlen int) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT coalesce(string_agg((ARRAY['a', 'b', ',', '"', E'\n', E'\r', ' ', '\', '.', MBCHAR, '""', 'x'])
                             [1 + floor(random() * 12)::int], ''), '')
  FROM generate_series(1, floor(random() * (maxlen + 1))::int)
$$;
CREATE FUNCTION random_field() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT CASE floor(random() * 4)::int
    WHEN 0 THEN ''
    WHEN 1 THEN '"' || replace(random_text(6), '"', '""') || '"'
    WHEN 2 THEN translate(random_text(6), E'",\n\r', '')
    ELSE random_text(4) END
$$;
-- a third of them any text, the others three fields and an ending
CREATE FUNCTION random_value() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT CASE floor(random() * 3)::int
    WHEN 0 THEN random_text(14)
    ELSE random_field() || ',' || random_field() || ',' || random_field() ||
         (ARRAY['', '', '', E'\n', E'\r\n', E'\r', ',', E'\n\n', E'x\ny'])[1 + floor(random() * 9)::int]
    END
$$;
};

# what the README says differs, or NULL: the same
my $differences = q{
SELECT v, decoded, copied FROM results
WHERE decoded IS DISTINCT FROM regexp_replace(copied, ' \(a later line\)$', '')
  AND NOT (v = '' AND decoded = 'error 22P04 message value holds no CSV record' AND copied = 'rows 0')
  AND NOT (decoded = 'error 22P04 message value holds more than one CSV record'
           AND (copied ~ '^rows ([2-9]|[1-9][0-9])' OR copied ~ '\(a later line\)$'))
ORDER BY v LIMIT 5};

for my $case (['UTF8', 'é'], ['LATIN1', 'é'], ['EUC_JP', '日本'], ['SQL_ASCII', 'é'])
{
	my ($encoding, $char) = @$case;
	my $db = lc "db_$encoding";
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING '$encoding' LOCALE 'C'");
	(my $sql = $setup) =~ s/FILE/$file/g;
	$sql =~ s/MBCHAR/'$char'/;
	$node->safe_psql($db, "SET client_encoding = 'UTF8';\nCREATE EXTENSION source_writes;\n$sql");
	(my $run = q{
		SELECT setseed(0.25);
		DO $$
		BEGIN
		  FOR i IN 1 .. COUNT LOOP
		    INSERT INTO results SELECT v, d.* FROM (SELECT random_value() AS v) g,
		      LATERAL compare(convert_to(v, getdatabaseencoding())) d
		    WHERE v !~ ('(^|[' || chr(10) || chr(13) || '])\\\\\.');   -- no line \.
		    IF i % 100 = 0 THEN COMMIT; END IF;
		  END LOOP;
		END $$}) =~ s/COUNT/$per_database/;
	$node->safe_psql($db, $run);
	my $rows = $node->safe_psql($db,
		q{SELECT count(*) || ' ' || count(*) FILTER (WHERE decoded ~ '^row') || ' '
		  || count(DISTINCT decoded) FROM results});
	my ($all, $decoded, $distinct) = split / /, $rows;
	note "$encoding: $all messages, $decoded decoded, $distinct distinct results";
	cmp_ok($decoded, '>', $all / 5, "$encoding: many random messages decode");
	is($node->safe_psql($db, $differences), '', "$encoding: each decodes as COPY reads it");
}

done_testing();
