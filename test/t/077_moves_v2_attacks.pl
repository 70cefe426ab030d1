# The outside review of format version 2 of moves (export() a line a
# call, import() in one pass) and of segments of format 3 (chunks of 256
# batches).  export() stopped early (LIMIT, cursors, SQL functions, loops
# left, errors, rescans) leaks nothing and does not fence; hostile lines
# are refused and write nothing; the lines table is read with the rights
# of a query (the schema's USAGE, the children of a table); a write to
# the source while its lines are read fails the import; a segment read in
# chunks answers as its rows did, and one whose chunks overlap is corrupt.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('frev', conf => q{
source_writes.compaction_interval = 0
source_writes.segment_delay = 0
});
sub sql { return $node->safe_psql('postgres', $_[0]); }

# statements that must succeed without any WARNING (leaks of snapshots,
# relations, buffers are WARNINGs at the end of a transaction)
sub clean
{
	my ($name, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	is($ret, 0, "$name: runs");
	unlike($err, qr/WARNING|leak/, "$name: leaks nothing") or diag($err);
	return $out;
}

# statements that must fail: their error (with its detail)
sub fails
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	isnt($ret, 0, "fails: $sql");
	return $err;
}

sql(q{
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9');
	CREATE FOREIGN TABLE s (id int, v text) SERVER hooks;
	INSERT INTO s SELECT g, 'v' || g FROM generate_series(1, 3000) g;
	UPDATE s SET v = 'x' WHERE id < 100;
	DELETE FROM s WHERE id > 2990;
	CREATE TABLE l (line text);
	INSERT INTO l SELECT source_writes.export('s');
	CREATE TABLE u AS SELECT ts, diff, origin, role, (data).id, (data).v
	  FROM source_writes.updates(NULL::s);
	CREATE FUNCTION ex(regclass) RETURNS SETOF text LANGUAGE sql
	  AS $$SELECT source_writes.export($1)$$;
});
# the rows the export counts at its end
my $nrows = sql(q~SELECT (regexp_match(line, '"rows": (\d+)'))[1] FROM l WHERE line LIKE '{"end"%'~);
my $udiff = q{SELECT count(*) FROM ((SELECT * FROM u EXCEPT ALL
	  SELECT ts, diff, origin, role, (data).id, (data).v FROM source_writes.updates(NULL::%s))
	UNION ALL (SELECT ts, diff, origin, role, (data).id, (data).v
	  FROM source_writes.updates(NULL::%s) EXCEPT ALL SELECT * FROM u)) x};

# export() stopped before its end, in every way a query can stop
clean('LIMIT 1, then a write in the transaction', q{
	BEGIN;
	SELECT source_writes.export('s', true) LIMIT 1;
	INSERT INTO s VALUES (5000, 'after');
	DELETE FROM s WHERE id = 5000;
	COMMIT});
is(sql(q{SELECT state FROM source_writes.sources WHERE source = 's'::regclass}) ne 'moved', 1,
	'a fenced export stopped by LIMIT does not fence');
clean('a cursor fetched in part, closed, then a write', q{
	BEGIN;
	DECLARE c CURSOR FOR SELECT source_writes.export('s');
	FETCH 2 FROM c;
	CLOSE c;
	INSERT INTO s VALUES (5001, 'after');
	DELETE FROM s WHERE id = 5001;
	COMMIT});
clean('a cursor fetched in part, open at commit', q{
	BEGIN;
	DECLARE c CURSOR FOR SELECT source_writes.export('s');
	FETCH 2 FROM c;
	COMMIT});
clean('a cursor fetched in part, rolled back', q{
	BEGIN;
	DECLARE c CURSOR FOR SELECT source_writes.export('s');
	FETCH 2 FROM c;
	ROLLBACK});
my $held = clean('a holdable cursor fetched in part, then after the commit', q{
	BEGIN;
	DECLARE h CURSOR WITH HOLD FOR SELECT source_writes.export('s');
	FETCH 1 FROM h;
	COMMIT;
	FETCH ALL FROM h;
	CLOSE h});
is(scalar(split /\n/, $held), sql(q{SELECT count(*) FROM source_writes.export('s')}), 'and it gives every line once');
is(clean('twice in a select list', q{SELECT count(a) || ' ' || count(b) FROM
	(SELECT source_writes.export('s') a, source_writes.export('s') b) x}),
	sql(q{SELECT count(*) FROM source_writes.export('s')}) . ' ' . sql(q{SELECT count(*) FROM source_writes.export('s')}), 'both export all');
clean('twice in a select list, LIMIT', q{SELECT count(*) FROM
	(SELECT source_writes.export('s') a, source_writes.export('s') b LIMIT 3) x});
clean('in a SQL function, LIMIT 1', q{SELECT ex('s') LIMIT 1});
is(clean('in a SQL function, in FROM', q{SELECT count(*) FROM ex('s')}),
	sql(q{SELECT count(*) FROM source_writes.export('s')}), 'in a SQL function, all lines');
clean('a PL/pgSQL loop left', q{DO $$DECLARE l text; BEGIN
	FOR l IN SELECT source_writes.export('s') LOOP EXIT; END LOOP; END$$});
clean('an error in a PL/pgSQL loop, caught', q{DO $$DECLARE l text; BEGIN
	BEGIN FOR l IN SELECT source_writes.export('s') LOOP RAISE EXCEPTION 'x'; END LOOP;
	EXCEPTION WHEN others THEN NULL; END; END$$});
is(clean('a subquery rescanned', q{SELECT string_agg(n::text, ',') FROM (SELECT
	(SELECT count(*) FROM (SELECT source_writes.export('s') LIMIT 2) q) n
	FROM generate_series(1, 3)) x}), '2,2,2', 'each rescan starts anew');
is(clean('LATERAL', q{SELECT count(*) FROM generate_series(1, 2) g,
	LATERAL (SELECT source_writes.export('s') LIMIT 2) q}), '4', 'LATERAL twice');
is(slurp_file($node->logfile) =~ /leak|WARNING/ ? 'leaks' : 'none', 'none',
	'the server logged no leak');

# memory: a partly read export holds a line, not the lines read
my $mem = q{SELECT sum(total_bytes) FROM pg_backend_memory_contexts};
my ($m1, $m2) = split /\n/, clean('memory of a long export', qq{
	CREATE FOREIGN TABLE big (id int, v text) SERVER hooks;
	INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 200000) g;
	BEGIN;
	DECLARE c CURSOR FOR SELECT source_writes.export('big');
	MOVE 100 FROM c;
	$mem;
	MOVE 8000 FROM c;
	$mem;
	COMMIT});
cmp_ok($m2, '<', $m1 + 1024 * 1024, 'memory does not grow with the lines read');

# fences: in FROM, the export is read whole, and fences (doc/moves.md)
sql(q{CREATE FOREIGN TABLE f2 (id int) SERVER hooks; INSERT INTO f2 VALUES (1);
	CREATE FOREIGN TABLE f3 (id int) SERVER hooks; INSERT INTO f3 VALUES (1);
	CREATE FOREIGN TABLE f4 (id int) SERVER hooks; INSERT INTO f4 VALUES (1)});
sql(q{SELECT x FROM source_writes.export('f3', true) x LIMIT 1});
like(fails(q{INSERT INTO f3 VALUES (2)}), qr/source table "f3" was moved/,
	'in FROM with LIMIT 1: fenced, as documented');
my $rest = clean('a fenced holdable cursor read in part across the commit', q{
	BEGIN;
	DECLARE h CURSOR WITH HOLD FOR SELECT source_writes.export('f2', true);
	FETCH 1 FROM h;
	COMMIT;
	FETCH ALL FROM h;
	CLOSE h});
like($rest, qr/\{"end": true, "batches": 1, "rows": 1/, 'the rest of its lines, to the end');
like(fails(q{INSERT INTO f2 VALUES (2)}), qr/source table "f2" was moved/,
	'fenced as the cursor was persisted');
like(fails(q{SELECT count(*) FROM (SELECT source_writes.export('f4', true)
	FROM generate_series(1, 2)) x}), qr/source table "f4" was moved already/,
	'a second fenced export in one statement is refused');
sql(q{INSERT INTO f4 VALUES (2)});
is(sql(q{SELECT count(*) FROM f4}), '2', '... and the statement fenced nothing');

# hostile lines: a clear error, nothing written
sql(q{CREATE FOREIGN TABLE s2 (id int, v text) SERVER hooks});
my @bad = (
	[ 'a column twice', q~SELECT CASE WHEN line LIKE '{"format"%' THEN replace(line,
		'[["id", "integer"], ["v", "text"]]', '[["id", "integer"], ["id", "integer"]]')
		ELSE line END FROM l~, qr/The header has column "id" twice/ ],
	[ 'a second header', q~SELECT line FROM l UNION ALL
		SELECT line FROM l WHERE line LIKE '{"format"%'~, qr/It has two headers/ ],
	[ 'a row of version 1 in version 2', q~SELECT line FROM l WHERE line NOT LIKE '{"end"%'
		UNION ALL SELECT '{"row": true, "added": null, "retracted": null, "part": null, "pos": null, "delivery": null, "data": {"id": "1", "v": "a"}}'
		UNION ALL SELECT regexp_replace(line, '"rows": (\d+)', '"rows": ' || ((regexp_match(line, '"rows": (\d+)'))[1]::int + 1)) FROM l
		WHERE line LIKE '{"end"%'~, qr/A row of format version 3 is an array/ ],
	[ 'an id out of range', q~SELECT regexp_replace(line, '^\[\[(\d+),',
		'[[99999999999999999999999,') FROM l~, qr/"added" is 99999999999999999999999, not an integer of 64 bits/ ],
	[ 'a part out of range', q~SELECT regexp_replace(line, '^\[\[(\d+),null,null',
		'[[\1,null,99999999999') FROM l~, qr/"part" is 99999999999, out of range/ ],
	[ 'a fraction', q~SELECT regexp_replace(line, '^\[\[(\d+),null,null,null',
		'[[\1,null,1,1.5') FROM l~, qr/"pos" is 1.5, not an integer/ ],
	[ 'deep nesting', q~SELECT line FROM l UNION ALL
		SELECT repeat('[', 5000) || repeat(']', 5000)~, qr/A row has 1 values/ ],
	[ 'a row in a line of 10,000 rows that names no batch', q~SELECT line FROM l UNION ALL
		SELECT '[' || string_agg('[' || CASE WHEN g = 10000 THEN '7777777' ELSE 'null' END
		  || ',null,null,null,null,"1","a"]', ',') || ']' FROM generate_series(1, 10000) g~,
		qr/A row names batch 7777777, which it has not/ ],
	[ 'a row line of 10,000 rows more than the end counts', q~SELECT line FROM l UNION ALL
		SELECT '[' || string_agg('[null,null,null,null,null,"1","a"]', ',') || ']'
		FROM generate_series(1, 10000) g~, qr/Its end counts $nrows rows, and it has @{[ $nrows + 10000 ]}/ ],
	[ 'a huge line', q~SELECT line FROM l UNION ALL
		SELECT '[[null,null,null,null,null,"1","' || repeat('a', 20000000) || '"]]'~,
		qr/Its end counts $nrows rows, and it has @{[ $nrows + 1 ]}/ ]);
for my $bad (@bad)
{
	my ($name, $select, $error) = @$bad;
	sql("DROP TABLE IF EXISTS bad; CREATE TABLE bad AS $select");
	like(fails(q{SELECT source_writes.import('s2', 'bad')}), $error, $name);
	is(sql(q{SELECT count(*) FROM source_writes.updates(NULL::s2)}), '0',
		"$name: nothing written");
}

# lines in reverse order (two passes): the same log
sql(q{CREATE TABLE rev AS SELECT line FROM (SELECT line, row_number() OVER () r FROM l) x
	ORDER BY r DESC;
	CREATE FOREIGN TABLE s3 (id int, v text) SERVER hooks;
	SELECT source_writes.import('s3', 'rev')});
is(sql(sprintf($udiff, 's3', 's3')), '0', 'lines in reverse order: the same updates()');

# the lines table, read with the rights of a query
sql(q~CREATE ROLE imp; CREATE ROLE other;
	GRANT USAGE ON FOREIGN SERVER hooks TO imp;
	GRANT CREATE ON SCHEMA public TO imp;
	CREATE TABLE ol (line text, secret text); INSERT INTO ol SELECT line, 'x' FROM l;
	ALTER TABLE ol OWNER TO other;
	CREATE TABLE ol2 (line text, secret text); INSERT INTO ol2 SELECT line, 'x' FROM l;
	ALTER TABLE ol2 OWNER TO other; GRANT SELECT (secret) ON ol2 TO imp;
	CREATE TABLE ol3 (line text); INSERT INTO ol3 SELECT line FROM l;
	ALTER TABLE ol3 OWNER TO other; ALTER TABLE ol3 ENABLE ROW LEVEL SECURITY;
	CREATE POLICY p ON ol3 FOR SELECT TO imp USING (line NOT LIKE '{"end"%');
	GRANT SELECT ON ol3 TO imp;
	SET ROLE imp;
	CREATE FOREIGN TABLE i1 (id int, v text) SERVER hooks;
	CREATE FOREIGN TABLE i2 (id int, v text) SERVER hooks;
	CREATE FOREIGN TABLE i3 (id int, v text) SERVER hooks~);
like(fails(q{SET ROLE imp; SELECT source_writes.import('i1', 'ol')}),
	qr/permission denied for table ol/, 'no SELECT on the lines: refused');
like(fails(q{SET ROLE imp; SELECT source_writes.import('i1', 'ol2')}),
	qr/permission denied for table ol2/, 'SELECT on another column only: refused');
like(fails(q{SET ROLE imp; SELECT source_writes.import('i1', 'ol3')}),
	qr/It has no end: it was cut short/, 'a policy hides lines: they are not read');
sql(q{GRANT SELECT (line) ON ol TO imp});
is(sql(q{SET ROLE imp; SELECT source_writes.import('i1', 'ol')}), $nrows,
	'SELECT on the column of the lines is enough (all that is read)');
is(sql(sprintf($udiff, 'i1', 'i1')), '0', '... the same updates()');

# a table of lines in a schema the caller may not use
sql(q{CREATE SCHEMA hidden; CREATE TABLE hidden.ol (line text);
	INSERT INTO hidden.ol SELECT line FROM l; GRANT SELECT ON hidden.ol TO imp});
my $hidden = sql(q{SELECT 'hidden.ol'::regclass::oid});
like(fails(q{SET ROLE imp; SELECT count(*) FROM hidden.ol}), qr/permission denied for schema hidden/,
	'the caller cannot read the lines with a query');
{
	like(fails("SET ROLE imp; SELECT source_writes.import('i2', $hidden)"),
		qr/permission denied for schema hidden/, 'nor through import()');
}

# lines in a child table: SELECT * FROM parent has them
sql(q{CREATE TABLE par (line text); CREATE TABLE chi () INHERITS (par);
	INSERT INTO chi SELECT line FROM l; CREATE FOREIGN TABLE s4 (id int, v text) SERVER hooks});
{
	my ($ret) = $node->psql('postgres', q{SELECT source_writes.import('s4', 'par')});
	is($ret, 0, 'the lines of a table with children are its rows and its children\'s');
}

# a view of lines whose code writes to the source being imported (code
# of a view runs as the caller): the import must not take rows that are
# not in the export
sql(q~CREATE FOREIGN TABLE s5 (id int, v text) SERVER hooks;
	CREATE FUNCTION sneak(text) RETURNS text LANGUAGE plpgsql AS $$BEGIN
	  IF $1 LIKE '{"end"%' THEN INSERT INTO s5 VALUES (-1, 'sneaked'); END IF;
	  RETURN $1; END$$;
	CREATE VIEW sv AS SELECT sneak(line) AS line FROM l~);
{
	my ($ret, $out, $err) = $node->psql('postgres', q{SELECT source_writes.import('s5', 'sv')});
	isnt($ret, 0, 'a write to the source during its import fails the import');
	is(sql(q{SELECT count(*) FROM s5 WHERE id = -1}), '0', 'and is not in the source');
}

# Segments of format 3: a segment row whose chunks repeat ids or go back
# (a superuser can write it) is corrupt, as one unsorted within a chunk is
sql(q{CREATE FOREIGN TABLE t (id int) SERVER k OPTIONS (topic 't')});
sql("INSERT INTO t VALUES ($_)") for 1 .. 5;
my $tblame = q{SELECT string_agg((data).id || ' ' || ts, ',' ORDER BY (data).id)
	FROM source_writes.blame(NULL::t)};
my $tbefore = sql($tblame);
sql(q{SET source_writes.segment_batches = 4; SELECT source_writes.compact('t')});
is(sql($tblame), $tbefore, 'blame() the same once rolled up');
my ($from, $to, $n) = split /\|/, sql(q{SELECT batch_from, batch_to, nbatches
	FROM source_writes.batch_segments WHERE source = 't'::regclass});
is($n, 4, 'a segment of 4 batches');
# chunks of 2: [from, from+1], then from from: [from+1, from+3] (from+2 left out)
my $chunk0 = '00010101' . '00020002' . '00' . '0002';
my $chunk1 = '01010201' . '00040002' . '00' . '0002';
my $skew = sprintf('\x0302%02x000100%02x', length($chunk0) / 2, length($chunk1) / 2)
  . $chunk0 . $chunk1;
is($to - $from, 3, 'its ids follow each other');
my $good = sql(q{SELECT batches FROM source_writes.batch_segments WHERE source = 't'::regclass});
{
	my ($ret, $out, $err) = $node->psql('postgres', qq{BEGIN;
		UPDATE source_writes.batch_segments SET batches = '$skew' WHERE source = 't'::regclass;
		SELECT count(*) FROM source_writes.blame(NULL::t)});
	like($err, qr/segment of source_writes.batch_segments is corrupt/,
		'a batch twice and one missing: corrupt');
	($ret, $out, $err) = $node->psql('postgres', qq{BEGIN;
		UPDATE source_writes.batch_segments SET batches = '$skew' WHERE source = 't'::regclass;
		SELECT count(*) FROM source_writes.export('t')});
	like($err, qr/segment of source_writes.batch_segments is corrupt/,
		'export() does not write a batch twice');
}
is(sql($tblame), $tbefore, 'untouched segment (the attacks rolled back)');

# Batches of one timestamp (a transaction that wrote as 300 roles) across
# chunks of 64 and 256, ids with gaps: the log reads the same rolled up,
# and exported and imported
sql(q{CREATE FOREIGN TABLE h (id int, pad text) SERVER hooks;
	DO $$BEGIN FOR i IN 1..300 LOOP EXECUTE format('CREATE ROLE r%s', i);
	  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON h TO r%s', i); END LOOP; END$$});
sql(q{DO $$BEGIN
	FOR i IN 1..100 LOOP INSERT INTO h VALUES (i, 'a'); COMMIT;
	  PERFORM nextval('source_writes.batch_ids') FROM generate_series(1, i * 10); END LOOP;
	FOR i IN 1..300 LOOP EXECUTE format('SET LOCAL ROLE r%s', i);
	  INSERT INTO h VALUES (1000 + i, 'r');
	  UPDATE h SET pad = 'by' || i WHERE id = i % 100 + 1; END LOOP;
	COMMIT;
	FOR i IN 1..200 LOOP INSERT INTO h VALUES (2000 + i, repeat('z', i)); COMMIT; END LOOP;
	END$$});
is(sql(q{SELECT count(*) - count(DISTINCT ts) FROM source_writes.batches
	WHERE source = 'h'::regclass}), '299', '300 batches of one timestamp');
my $hall = q{SELECT ts, diff, origin, role, (data).id, (data).pad FROM source_writes.updates(NULL::%s)};
my $hwin = q{SELECT b.ts, count(u.*), sum(hashtext((u.data).id || (u.data).pad || u.diff || u.role))
	FROM (SELECT DISTINCT ts FROM source_writes.updates(NULL::h)) b CROSS JOIN LATERAL
	(SELECT * FROM source_writes.updates(NULL::%s, since => b.ts, until => b.ts + 1)) u
	GROUP BY b.ts ORDER BY b.ts};
my $hblame = q{SELECT string_agg(ts || ' ' || role || ' ' || (data).id || ' ' || (data).pad
	|| ' ' || coalesce(xid::text, '-'), ',' ORDER BY (data).id) FROM source_writes.blame(NULL::%s)};
my %before = (all => sql(sprintf("$hall ORDER BY 1, 2, 5, 6", 'h')),
	win => sql(sprintf($hwin, 'h')), blame => sql(sprintf($hblame, 'h')));
my @asof = split /\n/, sql(q{SELECT DISTINCT ts FROM source_writes.updates(NULL::h) ORDER BY 1});
my $asof_read = sub {
	my ($table) = @_;
	return join ';', map {
		sql("BEGIN; SET LOCAL source_writes.as_of = '$_'; SELECT count(*) || ' ' ||
			coalesce(sum(hashtext(id || pad)), 0) FROM $table; COMMIT")
	} @asof[ grep { $_ % 23 == 0 || $_ >= 99 && $_ <= 101 } 0 .. $#asof ];
};
$before{asof} = $asof_read->('h');
sql(q{SET source_writes.segment_batches = 550; SELECT source_writes.compact('h')});
is(sql(q{SELECT nbatches FROM source_writes.batch_segments WHERE source = 'h'::regclass}),
	'550', 'a segment of 550 batches (three chunks)');
is(sql(sprintf("$hall ORDER BY 1, 2, 5, 6", 'h')), $before{all}, 'updates() the same rolled up');
is(sql(sprintf($hwin, 'h')), $before{win}, 'windows of one timestamp the same');
is(sql(sprintf($hblame, 'h')), $before{blame}, 'blame() the same');
is($asof_read->('h'), $before{asof}, 'as_of the same');
sql(q{CREATE TABLE hl AS SELECT source_writes.export('h') line;
	CREATE FOREIGN TABLE hi (id int, pad text) SERVER hooks;
	SELECT source_writes.import('hi', 'hl')});
is(sql(sprintf("$hall ORDER BY 1, 2, 5, 6", 'hi')), $before{all}, 'imported: updates() the same');
is(sql(sprintf($hwin, 'hi')), $before{win}, 'imported: windows the same');
(my $noxid = $before{blame}) =~ s/ [0-9-]+(,|$)/$1/g;
(my $imported = sql(sprintf($hblame, 'hi'))) =~ s/ [0-9-]+(,|$)/$1/g;
is($imported, $noxid, 'imported: blame() the same (but transactions)');
is($asof_read->('hi'), $before{asof}, 'imported: as_of the same');
is(sql(q{SELECT (SELECT row(since, upper) FROM source_writes.frontiers('h'))
	= (SELECT row(since, upper) FROM source_writes.frontiers('hi'))}), 't',
	'imported: the same frontiers');

done_testing();
