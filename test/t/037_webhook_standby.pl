# With a real synchronous standby, a webhook group's commit waits for it
# and answers 200 whatever synchronous_commit the database sets (remote_write,
# remote_apply, local); its rows are on the standby when the answer comes
# (remote_apply).  A standby that is gone holds the answer back; a cancel
# of that wait closes the connection unanswered; the standby back, 200.
# The same with log_min_messages = error (the cut is known from a warning),
# and when the worker is terminated during the wait; a kill -9 then leaves
# the row committed once, and a retry with its idempotency key gets 200.
# An index made on the primary is used by the standby's reads.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $standby_port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('primary', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "wal_level = replica\nmax_wal_senders = 4\nwal_keep_size = '64MB'\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST {"id": ID}: "<answer> <status>", newlines dropped
sub post
{
	my ($id) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '60',
		"$base/public/ev", '--data-binary', qq({"id": "$id"}), '-H', 'Content-Type: application/json' ]);
	$out =~ s/\n//g;
	return $out;
}

sub worker_pid
{
	return sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
}

sub standby_is_sync
{
	return $node->poll_query_until('postgres',
		q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'});
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE ev (id text) SERVER hooks OPTIONS (format 'json')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');

$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "source_writes.webhook_listen = '127.0.0.1:$standby_port'\n");
$standby->start;
sql(q{ALTER SYSTEM SET synchronous_standby_names = 'standby'; SELECT pg_reload_conf()});
ok(standby_is_sync(), 'the standby is synchronous');

my $log = -s $node->logfile;
is(post('on'), '1 row 200', 'synchronous_commit on: 200');
for my $setting ('remote_write', 'remote_apply', 'local')
{
	sql("ALTER DATABASE postgres SET synchronous_commit = $setting");
	my $old = worker_pid();
	my $from = -s $node->logfile;
	sql("SELECT pg_terminate_backend($old)");
	ok($node->wait_for_log(qr/webhook server listening on/, $from),
		"the worker starts again, with the database's synchronous_commit = $setting");
	is(post($setting), '1 row 200', "$setting: 200");
	if ($setting eq 'remote_apply')
	{
		is($standby->safe_psql('postgres', q{SELECT count(*) FROM ev WHERE id = 'remote_apply'}), '1',
			'remote_apply: the row is on the standby when the answer comes');
	}
}
unlike(substr(slurp_file($node->logfile), $log), qr/without an answer/,
	'no connection closed unanswered while the standby is there');

# the standby goes away: the answer waits; a cancel of the wait closes the
# connection; the standby back, 200 again
$standby->stop;
my ($out, $err) = ('', '');
my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '60',
	"$base/public/ev", '--data-binary', '{"id": "down"}', '-H', 'Content-Type: application/json' ],
	'>', \$out, '2>', \$err);
ok($node->poll_query_until('postgres', q{SELECT wait_event = 'SyncRep' FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server'}), 'with the standby gone, the worker waits for it');
$h->pump_nb;
is($out, '', 'no answer meanwhile');
sql('SELECT pg_cancel_backend(' . worker_pid() . ')');
$h->finish;
is($out, ' 000', 'the wait cancelled: the connection is closed unanswered');
$standby->start;
ok(standby_is_sync(), 'the standby is back');
is(post('back'), '1 row 200', 'then 200');
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id) FROM ev}),
	'back,down,local,on,remote_apply,remote_write', 'the standby has every row, once');

# post ID with curl in the background while the standby is gone, and wait
# until the worker waits for it; returns the curl's handle and output
sub post_to_absent_standby
{
	my ($id, @headers) = @_;
	my $out = '';
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '60',
		"$base/public/ev", '--data-binary', qq({"id": "$id"}), '-H', 'Content-Type: application/json',
		map { ('-H', $_) } @headers ], '>', \$out, '2>', \my $err);
	ok($node->poll_query_until('postgres', q{SELECT wait_event = 'SyncRep' FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server'}), "$id: the worker waits for the standby");
	return ($h, \$out);
}

# a wait cut short is known from PostgreSQL's warning, which the server log
# may not take: the same with log_min_messages = error; and a terminate
# (the other warning) closes the connection unanswered too, the row
# committed locally
$standby->stop;
sql(q{ALTER SYSTEM SET log_min_messages = 'error'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', q{SELECT current_setting('log_min_messages') = 'error'});
my ($h2, $out2) = post_to_absent_standby('quiet');
sql('SELECT pg_cancel_backend(' . worker_pid() . ')');
$h2->finish;
is($$out2, ' 000', 'log_min_messages = error: the wait cancelled, the connection is closed unanswered');
sql(q{ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()});
my $terminated = worker_pid();
my ($h3, $out3) = post_to_absent_standby('terminated');
sql("SELECT pg_terminate_backend($terminated)");
$h3->finish;
is($$out3, ' 000', 'the worker terminated while it waits: the connection is closed unanswered');
ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND pid <> $terminated}), 'the worker starts again');

# kill -9 of the worker while it waits: the server restarts, the
# connection is closed unanswered, and a retry with an idempotency key is
# answered as the first delivery was, its row once
sql(q{ALTER SYSTEM SET restart_after_crash = on; SELECT pg_reload_conf()});
sql(q{ALTER FOREIGN TABLE ev OPTIONS (ADD idempotency_header 'Idempotency-Key')});
my ($h4, $out4) = post_to_absent_standby('killed', 'Idempotency-Key: k-killed');
my $from = -s $node->logfile;
kill 'KILL', worker_pid();
$h4->finish;
like($$out4, qr/ 000$/, 'kill -9 of the worker while it waits: no answer');
ok($node->wait_for_log(qr/webhook server listening on/, $from), 'the server is back, and its worker');
$standby->start;
ok(standby_is_sync(), 'the standby is back');
is(post('killed'), '1 row 200', 'a retry without the key writes it again (at least once)');
my ($retry) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '60',
	"$base/public/ev", '--data-binary', '{"id": "killed"}', '-H', 'Content-Type: application/json',
	'-H', 'Idempotency-Key: k-killed' ]);
$retry =~ s/\n//g;
like($retry, qr/ 200$/, 'a retry with the key: 200');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM
	(SELECT id, count(*) AS n FROM ev GROUP BY id) c}),
	'back:1,down:1,killed:2,local:1,on:1,quiet:1,remote_apply:1,remote_write:1,terminated:1',
	'every row once, but the one sent again without its key');
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT count(*) FROM ev}), '10', 'and the standby has them');

# an index made on the primary is the standby's too: its reads use it, and
# find the rows the primary changes after the index was made
sql(q{INSERT INTO ev SELECT 'r' || g FROM generate_series(1, 2000) g;
	CREATE INDEX ev_id ON ev (id);
	ANALYZE ev;
	DELETE FROM ev WHERE id = 'r43'});
is(post('r2001'), '1 row 200', 'a row posted after the index was made');
$node->wait_for_catchup($standby);
my $by_id = q{SELECT string_agg(id, ',' ORDER BY id) FROM ev
	WHERE id IN ('killed', 'r42', 'r43', 'r2001')};
like($standby->safe_psql('postgres', "EXPLAIN (COSTS OFF) $by_id"),
	qr/(Index (Only )?Scan: |Bitmap Index Scan on )ev_id\b/,
	'the standby reads through the index made on the primary');
is($standby->safe_psql('postgres', $by_id), 'killed,killed,r2001,r42',
	'and finds the rows the primary has, not the one it deleted');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM ev}), '2010',
	'the standby has every row');

done_testing();
