# Provenance of ingested rows: each row keeps the Kafka message (partition
# and offset) or the webhook delivery (its idempotency key, when it came)
# it came from, through upserts, retried errors and people's edits;
# blame() and history() show it; diff() reads what changed in between, not
# the table.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;

my $broker = SwTest::broker(topics => [ 'ev:2', 'kv:1' ]);
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('provenance',
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\nsource_writes.compaction_interval = 1\nmax_worker_processes = 24\n");
my $base = "http://127.0.0.1:$port/postgres/public";

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub post { my ($table, @rest) = @_; return SwTest::post("$base/$table", @rest); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE ev (id int, v text,
	  part int OPTIONS (source 'partition'), off bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'ev');
	CREATE FOREIGN TABLE kv (k int, v text, off bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'kv', envelope 'upsert', key 'k');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks
	  OPTIONS (idempotency_header 'Idempotency-Key');
	CREATE ROLE editor;
	GRANT SELECT, INSERT, UPDATE, DELETE ON ev, kv, pay TO editor});

# Kafka: every row's position is its message's
SwTest::produce($broker, 'ev', map { qq(\t{"id": $_, "v": "e$_"}) } 1 .. 200);
SwTest::produce($broker, 'ev', qq(\t{"id": "not a number"}));
sql(q{SELECT source_writes.wait_for('ev')});
is(sql(q{SELECT count(*) || ' ' || count(*) FILTER (WHERE "partition" = (data).part
		AND "offset" = (data).off AND origin = 'kafka')
		FROM source_writes.blame(NULL::ev)}),
	'200 200', "blame(): each row's partition and offset are its message's");

# a kept error, retried: its row keeps its message's position too
sql(q{ALTER FOREIGN TABLE ev ALTER COLUMN id TYPE text});
is(sql(q{SELECT source_writes.retry_errors('ev')}), '1', 'the kept error is retried');
is(sql(q{SELECT "partition" = (data).part AND "offset" = (data).off, origin
		FROM source_writes.blame(NULL::ev) WHERE (data).id = 'not a number'}),
	't|kafka', 'the retried row has its position');

# a person's edit keeps the position of the row it replaces
sql(q{SET ROLE editor; UPDATE ev SET v = 'fixed' WHERE id = '7'; INSERT INTO ev (id, v) VALUES ('typed', 't')});
is(sql(q{SELECT string_agg(origin || ' ' || coalesce(("offset" = (data).off)::text, 'none'), ', '
		ORDER BY (data).id) FROM source_writes.blame(NULL::ev) WHERE (data).id IN ('7', 'typed')}),
	'user true, user none', "an UPDATE keeps its row's position, an INSERT has none");

# upserts: the key's row has the position of its last message (a batch
# writes a key's last message only)
for my $round (0 .. 2)
{
	SwTest::produce($broker, 'kv',
		map { qq({"k": @{[$_ % 3]}}\t{"k": @{[$_ % 3]}, "v": "v$_"}) } (3 * $round + 1) .. (3 * $round + 3));
	sql(q{SELECT source_writes.wait_for('kv')});
}
is(sql(q{SELECT string_agg((data).k || ':' || "offset" || ':' || ("offset" = (data).off), ' '
		ORDER BY (data).k) FROM source_writes.blame(NULL::kv)}),
	'0:8:true 1:6:true 2:7:true', "an upserted key's row has its last message's position");
is(sql(q{SELECT string_agg("offset"::text, ',' ORDER BY valid_from)
		FROM source_writes.history(NULL::kv) WHERE (data).k = 1}),
	'0,3,6', 'history(): every version of a key, each with its message');

# webhooks: a delivery's rows have its idempotency key and when it came
ok($node->poll_query_until('postgres', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'the webhook server listens');
my $before = time();
is(post('pay', qq({"id": 1, "note": "a"}\n{"id": 2, "note": "b"}\n{"id": 3, "note": "c"}\n),
	'Content-Type: application/x-ndjson', 'Idempotency-Key: delivery-1'),
	'200 3 rows', 'a delivery of three rows');
is(post('pay', qq({"id": 4, "note": "d"}), 'Content-Type: application/json'),
	'200 1 row', 'a delivery without a key');
is(post('pay', qq({"id": 5, "note": "e"}), 'Content-Type: application/json'),
	'200 1 row', 'and another');
my $after = time();
is(sql(qq{SELECT string_agg((data).id || ':' || coalesce(delivery, '-') || ':'
		|| (extract(epoch FROM received_at) BETWEEN $before - 1 AND $after + 1), ' '
		ORDER BY (data).id) FROM source_writes.blame(NULL::pay)}),
	'1:delivery-1:true 2:delivery-1:true 3:delivery-1:true 4:-:true 5:-:true',
	"each row has its delivery's key and when it came");
is(sql(q{SELECT count(DISTINCT received_at) FROM source_writes.blame(NULL::pay)}), '3',
	'each delivery its own time, the rows of one delivery the same');
is(sql(q{SELECT "partition" IS NULL AND "offset" IS NULL FROM source_writes.blame(NULL::pay) LIMIT 1}),
	't', 'webhook rows have no Kafka position');

# diff() of the last edit of a big table reads the blocks that edit wrote,
# not the table
sql(q{CREATE FOREIGN TABLE big (id int, pad text) SERVER hooks;
	INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 100000) g});
my $t1 = sql(q{SELECT upper - 1 FROM source_writes.frontiers('big')});
sql(q{UPDATE big SET pad = 'changed' WHERE id = 50000});
my $t2 = sql(q{SELECT upper - 1 FROM source_writes.frontiers('big')});
my ($heap, $history) = split /\|/, sql(q{SELECT current_rel, history_rel
	FROM source_writes.source_tables WHERE relid = 'big'::regclass});
sql(qq{ALTER TABLE $heap SET (autovacuum_enabled = off); VACUUM $heap});
my $pages = sql(qq{SELECT pg_relation_size('$heap') / current_setting('block_size')::int});
cmp_ok($pages, '>', 1000, 'the table has many pages');
my $out = $node->safe_psql('postgres', qq{
	SELECT 'diff ' || string_agg(change || ' ' || (data).id || ' ' || (data).pad, ', ' ORDER BY change)
	FROM source_writes.diff(NULL::big, $t1, $t2);
	SELECT 'flush ' || (pg_stat_force_next_flush() IS NULL);
	SELECT 'before ' || sum(heap_blks_read + heap_blks_hit) FROM pg_statio_all_tables
	WHERE relid IN ('$heap'::regclass, '$history'::regclass);
	SELECT 'again ' || count(*) FROM source_writes.diff(NULL::big, $t1, $t2);
	SELECT 'flush ' || (pg_stat_force_next_flush() IS NULL);
	SELECT 'after ' || sum(heap_blks_read + heap_blks_hit) FROM pg_statio_all_tables
	WHERE relid IN ('$heap'::regclass, '$history'::regclass)});
my %got = map { split / /, $_, 2 } split /\n/, $out;
is($got{diff}, "added 50000 changed, removed 50000 " . ('x' x 100), 'diff() of the edit');
is($got{again}, '2', 'the same again');
my $read = $got{after} - $got{before};
cmp_ok($read, '<=', 4, "diff() read $read blocks of the $pages of the current rows");

# storage made before positions were kept (a dump of 0.2, restored): the
# restore takes it as it is, the next ALTER (here, in the restore's
# transaction, before the supervisor can) gives it the columns after its
# others, and its rows, old and new, are edited, retracted and read; where
# nobody alters it, the supervisor gives it them
sql(q{CREATE DATABASE old; CREATE DATABASE restored; CREATE DATABASE completed});
$node->safe_psql('old', q{
	CREATE EXTENSION source_writes;
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE t (id int, note text) SERVER hooks;
	INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g;
	UPDATE t SET note = 'edited' WHERE id = 1;
	DELETE FROM t WHERE id = 2});
my $dump = PostgreSQL::Test::Utils::tempdir() . '/old.sql';
SwTest::run_client('pg_dump of a source', 'pg_dump', '-Fp', '-f', $dump, $node->connstr('old'));
# take the columns of 0.3 out of its storage, as a dump of 0.2 has it
my $text = slurp_file($dump);
my $removed = 0;
$text =~ s/^    "\$(part|pos|delivery)" (integer|bigint|text)( COLLATE pg_catalog\."C")?,\n/$removed++; ''/mge;
my @lines = split /\n/, $text, -1;
my $cut;
for my $line (@lines)
{
	if ($line =~ /^COPY source_writes_internal\.\w+ \((.*)\) FROM stdin;$/)
	{
		my @cols = split /, /, $1;
		$cut = [ grep { $cols[$_] =~ /^"\$(part|pos|delivery)"$/ } 0 .. $#cols ];
		my %gone = map { $_ => 1 } @$cut;
		$line =~ s/\(.*\)/'(' . join(', ', map { $cols[$_] } grep { !$gone{$_} } 0 .. $#cols) . ')'/e;
		next;
	}
	if ($cut && $line eq '\.') { $cut = undef; next; }
	next unless $cut;
	my @fields = split /\t/, $line, -1;
	my %gone = map { $_ => 1 } @$cut;
	$line = join("\t", map { $fields[$_] } grep { !$gone{$_} } 0 .. $#fields);
}
is($removed, 6, 'the dump without the columns of 0.3');
PostgreSQL::Test::Utils::append_to_file("$dump.old", join("\n", @lines));
my $history_columns = q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	WHERE attrelid = (SELECT history_rel FROM source_writes.source_tables) AND attnum > 0};
my ($restore_out) = run_command([ 'psql', '-X', '-q', '-At', '-1', '-v', 'ON_ERROR_STOP=1',
	'-d', $node->connstr('restored'), '-f', "$dump.old",
	'-c', "SELECT 'before ' || ($history_columns)",
	'-c', q{SELECT 'read ' || string_agg(id || note, ',' ORDER BY id) FROM public.t WHERE id <= 3},
	'-c', q{INSERT INTO public.t VALUES (11, 'before alter');
		UPDATE public.t SET note = 'u1' WHERE id IN (3, 11)},
	'-c', q{ALTER FOREIGN TABLE public.t ADD COLUMN extra text DEFAULT 'x'} ]);
sub restored { return $node->safe_psql('restored', $_[0]); }
like($restore_out, qr/^before id,note,\$batch,\$retracted$/m, 'the restored storage has no positions');
like($restore_out, qr/^read 1edited,3row 3$/m, 'its rows are read and edited');
is(restored(q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = (SELECT history_rel FROM source_writes.source_tables) AND attnum > 0}),
	'id,note,$batch,$retracted,extra,$part,$pos,$delivery',
	'ALTER gives it the columns, after those it had then');
restored(q{UPDATE t SET note = 'u2' WHERE id IN (1, 3, 11); DELETE FROM t WHERE id = 4;
	INSERT INTO t VALUES (12, 'after alter', 'y')});
is(restored(q{SELECT string_agg(id || ' ' || note || ' ' || extra, ', ' ORDER BY id) FROM t
		WHERE id IN (1, 3, 4, 11, 12)}),
	'1 u2 x, 3 u2 x, 11 u2 x, 12 after alter y', 'rows of both shapes are edited and retracted');
is(restored(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::t)
		GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0',
	'the log holds no negative or doubled multiplicity');
is(restored(q{SELECT string_agg((data).note || ':' || (valid_to IS NULL), ',' ORDER BY valid_from, valid_to)
		FROM source_writes.history(NULL::t) WHERE (data).id = 3}),
	'row 3:false,u1:false,u2:true', 'history() reads the versions of both shapes');
is(restored(q{SELECT string_agg(origin || ':' || (data).id, ',' ORDER BY (data).id)
		FROM source_writes.blame(NULL::t) WHERE (data).id IN (1, 12)}),
	'user:1,user:12', 'and blame() the rows');

# users' indexes on storage of two runs: on a column added after the
# positions, an expression over columns on both sides of them, REINDEX,
# index-only scans, ALTER TYPE; each read next to a sequential scan
restored(q{ALTER FOREIGN TABLE t ADD COLUMN more int;
	UPDATE t SET more = id * 10;
	CREATE INDEX t_more ON t (more);
	CREATE INDEX t_expr ON t ((more + id), extra);
	CREATE INDEX t_note ON t (note) WHERE more > 20;
	INSERT INTO t VALUES (13, 'indexed', 'z', 130)});
sub both
{
	my ($query) = @_;
	my $seq = restored("SET enable_indexscan = off; SET enable_bitmapscan = off; $query");
	my $plan = restored("SET enable_seqscan = off; EXPLAIN (COSTS OFF) $query");
	my $idx = restored("SET enable_seqscan = off; $query");
	like($plan, qr/Index (Only )?Scan/, "an index answers $query");
	is($idx, $seq, "... as a scan does: $query");
	return $idx;
}
is(both(q{SELECT string_agg(id || ':' || note, ',') FROM t WHERE more = 30}), '3:u2',
	'an index on a column after the positions');
is(both(q{SELECT string_agg(id::text, ',') FROM t WHERE more + id = 143}), '13',
	'an index on an expression');
is(both(q{SELECT string_agg(note, ',' ORDER BY note) FROM t WHERE note > 'r' AND more > 20}),
	'row 10,row 5,row 6,row 7,row 8,row 9,u2,u2', 'a partial index');
is(both(q{SELECT string_agg(more::text, ',' ORDER BY more) FROM t WHERE more >= 100}),
	'100,110,120,130', 'an index-only scan');
restored(q{REINDEX TABLE t; ALTER FOREIGN TABLE t ALTER COLUMN more TYPE bigint;
	INSERT INTO t VALUES (14, 'retyped', 'w', 140)});
is(both(q{SELECT string_agg(id || ':' || more, ',' ORDER BY id) FROM t WHERE more >= 120}),
	'12:120,13:130,14:140', 'REINDEX and ALTER TYPE');
is(both(q{SELECT string_agg(id::text, ',') FROM t WHERE more + id = 154}), '14',
	'the expression after ALTER TYPE');
is(restored(q{SELECT string_agg((data).id || ':' || (data).more, ',' ORDER BY (data).id)
		FROM source_writes.blame(NULL::t) WHERE (data).id >= 12}),
	'12:120,13:130,14:140', 'blame() reads the column after the positions');

SwTest::run_client('psql of the dump of old storage, left alone',
	'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('completed'), '-f', "$dump.old");
ok($node->poll_query_until('completed', $history_columns,
	'id,note,$batch,$retracted,$part,$pos,$delivery'),
	'the supervisor gives the storage the columns');
$node->safe_psql('completed', q{UPDATE t SET note = 'later' WHERE id = 5; DELETE FROM t WHERE id = 6});
is($node->safe_psql('completed', q{SELECT string_agg((data).note || ':' || (valid_to IS NULL), ','
		ORDER BY valid_from, valid_to) FROM source_writes.history(NULL::t) WHERE (data).id IN (5, 6)}),
	'row 5:false,row 6:false,later:true', 'and its rows are edited and read');

done_testing();
