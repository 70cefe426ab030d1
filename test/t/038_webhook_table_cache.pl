# The webhook worker keeps what it prepared for a table (options, decoder)
# from one group of requests to the next: a table that is altered is
# written as it is now, a dropped one is gone, and a table made again
# under the same name is the new one.  The requests of one group to tables
# of different owners each run as their own table's owner, and a request
# that fails takes nothing of the others of its group with it.
# source_writes.webhook_bench_discard, the switch that drops every post in
# the benchmarks' own build, is not in a release build.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SwTest;

my $from;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('cache', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port/postgres/public";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST a JSON body with curl: "status body"
sub post
{
	my ($table, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}',
		'-H', 'Content-Type: application/json', '--data-binary', $body, "$base/$table" ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE t (id text, n int) SERVER hooks OPTIONS (format 'json')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
is(post('t', '{"id": "a", "n": 1}'), '200 1 row', 'a first post');

# the table changes between posts: each post sees it as it is
sql(q{ALTER FOREIGN TABLE t ADD COLUMN extra text});
is(post('t', '{"id": "b", "n": 2, "extra": "x"}'), '200 1 row', 'after ADD COLUMN');
sql(q{ALTER FOREIGN TABLE t ALTER COLUMN n TYPE numeric});
is(post('t', '{"id": "c", "n": 2.5}'), '200 1 row', 'after ALTER COLUMN TYPE');
sql(q{ALTER FOREIGN TABLE t ALTER COLUMN extra OPTIONS (ADD field 'other')});
is(post('t', '{"id": "d", "other": "y", "extra": "not this"}'), '200 1 row',
	'after a column option changed');
is(sql(q{SELECT string_agg(id || ':' || coalesce(n::text, '-') || ':' || coalesce(extra, '-'), ',' ORDER BY id) FROM t}),
	'a:1:-,b:2:x,c:2.5:-,d:-:y', 'each row as the table was when it was posted');
sql(q{ALTER FOREIGN TABLE t OPTIONS (ADD max_body_bytes '24')});
is(post('t', '{"id": "e", "extra": "0123456789"}'), '413 the body is larger than this table takes',
	'after a table option changed');
sql(q{CREATE ROLE alice; CREATE ROLE bob; ALTER FOREIGN TABLE t OWNER TO alice});
is(post('t', '{"id": "f"}'), '200 1 row', 'after the owner changed');
is(sql(q{SELECT role FROM source_writes.updates(NULL::t) WHERE (data).id = 'f'}), 'alice',
	'the post is written as the new owner');
sql(q{DROP FOREIGN TABLE t});
is(post('t', '{"id": "g"}'), '404 no webhook source table at this address', 'a dropped table: 404');
sql(q{CREATE FOREIGN TABLE t (id text, w int) SERVER hooks OPTIONS (format 'json')});
is(post('t', '{"id": "h", "w": 7}'), '200 1 row', 'a new table of the same name');
is(sql(q{SELECT id || ':' || w FROM t}), 'h:7', 'is written as the new one');

# groups that write to tables of two owners, with bad requests among them:
# each table's rows are written as its owner, and each 200 is there once
sql(q{CREATE FOREIGN TABLE ta (id text, n int, who name DEFAULT current_user,
	  w text DEFAULT pg_catalog.pg_sleep(0.002)::text) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE tb (id text, n int, who name DEFAULT current_user)
	  SERVER hooks OPTIONS (format 'json');
	ALTER FOREIGN TABLE ta OWNER TO alice; ALTER FOREIGN TABLE tb OWNER TO bob});
my @clients;
for my $c (1 .. 16)
{
	my @cmd = ('curl');
	for my $i (1 .. 20)
	{
		my $table = ($c + $i) % 2 ? 'ta' : 'tb';
		my $body = qq({"id": "c$c-$i", "n": $i});
		# every fifth one is bad: a good row, then a bad one
		$body .= qq(\n{"id": "c$c-$i-bad", "n": "x"}) if $i % 5 == 0;
		push @cmd, ('-s', '-o', '/dev/null', '-w', "$table %{http_code}\\n", '-X', 'POST',
			'-H', 'Content-Type: application/json', '--data-binary', $body, "$base/$table", '--next');
	}
	pop @cmd;
	my $stdout = '';
	push @clients, [ IPC::Run::start(\@cmd, '>', \$stdout), \$stdout ];
}
my %answers;
for my $client (@clients)
{
	$client->[0]->finish;
	$answers{$1}{$2}++ while ${ $client->[1] } =~ /^(t[ab]) (\d+)$/mg;
}
is_deeply(\%answers, { ta => { 200 => 128, 400 => 32 }, tb => { 200 => 128, 400 => 32 } },
	'16 concurrent clients: the good requests 200, the bad ones 400');
is(sql(q{SELECT (SELECT count(DISTINCT id) || ' ' || count(*) || ' ' || string_agg(DISTINCT who::text, ',') FROM ta)
	|| ' ' || (SELECT count(DISTINCT id) || ' ' || count(*) || ' ' || string_agg(DISTINCT who::text, ',') FROM tb)}),
	'128 128 alice 128 128 bob', 'each 200 there once, written as its table\'s owner');
is(sql(q{SELECT count(*) FROM (SELECT id FROM ta UNION ALL SELECT id FROM tb) t
	WHERE split_part(id, '-', 2)::int % 5 = 0}), '0', 'nothing of the bad ones, not even their good first rows');
cmp_ok(sql(q{SELECT count(*) FROM (SELECT xid FROM source_writes.batches
	WHERE source IN ('ta'::regclass, 'tb'::regclass) GROUP BY xid HAVING count(DISTINCT source) = 2) g}),
	'>', 0, 'some groups wrote to both tables');

# the worker keeps what it prepared for at most 128 tables: past that it
# starts again from none.  What it keeps of ta and tb must not depend on
# whether it read the invalidations of the 130 new tables one by one or
# lost them in a reset of its caches: a change of the server makes it
# forget every table at its next group.
sql(q{DO $$ BEGIN FOR i IN 1 .. 130 LOOP
	EXECUTE format('CREATE FOREIGN TABLE many%s (id text) SERVER hooks OPTIONS (format ''json'')', i);
	END LOOP; END $$});
sql(q{ALTER SERVER hooks VERSION 'many tables'});
my @many = grep { post("many$_", '{"id": "x"}') ne '200 1 row' } 1 .. 130;
is("@many", '', 'a post to each of 130 tables');
is(post('many1', '{"id": "y"}'), '200 1 row', 'and one more to the first of them');
my $worker = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
$from = -s $node->logfile;
sql("SELECT pg_log_backend_memory_contexts($worker)");
ok($node->wait_for_log(qr/Grand total: /, $from), 'the worker logs its memory');
my $contexts = () = substr(slurp_file($node->logfile), $from) =~ /source_writes webhook table: /g;
is($contexts, 2, 'it keeps two tables: the one written after it forgot the others, and the first again');

# the benchmarks' switch that drops every post is not in a release build
# (it is in theirs only): there is no such setting, and set in
# postgresql.conf, it is refused at start and changes nothing
my ($rc, $out, $err) = $node->psql('postgres', q{SHOW source_writes.webhook_bench_discard});
like($err, qr/unrecognized configuration parameter "source_writes\.webhook_bench_discard"/,
	'a release build has no benchmark switch');
$node->append_conf('postgresql.conf', "source_writes.webhook_bench_discard = on\n");
$from = -s $node->logfile;
$node->restart;
ok($node->wait_for_log(
		qr/invalid configuration parameter name "source_writes\.webhook_bench_discard", removing it/, $from),
	'set in postgresql.conf, it is refused at start');
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/, $from),
	'the webhook server listens');
is(post('tb', '{"id": "kept"}'), '200 1 row', 'a post is written as ever');
is(sql(q{SELECT count(*) FROM tb WHERE id = 'kept'}), '1', 'and its row is there');
unlike(slurp_file($node->logfile, $from), qr/discards every request/, 'nothing is discarded');

done_testing();
