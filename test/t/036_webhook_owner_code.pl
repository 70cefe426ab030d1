# A webhook source's own code (defaults, domains, input functions) runs in
# the worker, a superuser session that serves every table: as the table's
# owner, restricted, with a search_path of pg_catalog, also when the owner
# is the worker's own role; what it leaves to the session (advisory locks)
# does not outlive its group; a privilege revoked from the owner holds at
# once.  Bad values get 400 whatever their type's error code, and the
# answer shows neither the table's code nor, in the log, the body.  The
# worker's commit is bounded by lock_timeout, and waits for synchronous
# standbys whatever the database's synchronous_commit says (a wait cut
# short closes the connections unanswered).  Addresses
# that are no table leave nothing in the worker's memory.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
# (the log is read for refusals after the first of a table each minute,
# which are logged at DEBUG1)
my $node = SwTest::node('owner_code', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "wal_level = replica\nmax_wal_senders = 2\nlog_min_messages = debug1\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub sql_as { my ($role, $q) = @_; return $node->safe_psql('postgres', "SET ROLE $role; $q"); }

# POST a JSON body: "<status> <answer>", the answer on one line
sub post
{
	my ($path, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', '%{http_code} ', "$base$path",
		'--data-binary', $body, '-H', 'Content-Type: application/json' ]);
	# the answer comes first, the status after it
	$out =~ s/\n//g;
	$out =~ /^(.*)(\d{3}) $/s or return $out;
	return "$2 $1";
}

sub worker_pid
{
	return sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
}

# end the worker; the launcher starts another, which connects afresh (with
# the database's settings as they are now)
sub restart_worker
{
	my $old = worker_pid();
	my $log = -s $node->logfile;
	sql("SELECT pg_terminate_backend($old)");
	ok($node->wait_for_log(qr/webhook server listening on/, $log),
		'the worker is started again');
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook')});

# 1. A table of the worker's own role (the bootstrap superuser): its code
# runs restricted, with names in pg_catalog, whatever search_path the
# database's owner, no superuser, sets for it.
sql(q{CREATE FUNCTION public.norm(t text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN RETURN lower(t); END $$;
	CREATE FUNCTION public.probe() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		BEGIN
			CREATE TEMP TABLE probe_t (x int);
			RETURN current_setting('search_path') || ' / unrestricted';
		EXCEPTION WHEN OTHERS THEN
			RETURN current_setting('search_path') || ' / ' || SQLERRM;
		END;
	END $$;
	CREATE FOREIGN TABLE orders (id text, tag text DEFAULT public.norm('X'),
		how text DEFAULT public.probe()) SERVER hooks OPTIONS (format 'json');
	CREATE ROLE dbo LOGIN;
	ALTER DATABASE postgres OWNER TO dbo;
	GRANT USAGE ON FOREIGN SERVER hooks TO dbo});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
is(post('/public/orders', '{"id": "1"}'), '200 1 row', 'a post');
sql_as('dbo', q{CREATE SCHEMA evil;
	CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN EXECUTE 'ALTER ROLE dbo SUPERUSER'; RETURN 'pwned'; END $$;
	ALTER DATABASE postgres SET search_path = evil, pg_catalog, public});
restart_worker();
is(post('/public/orders', '{"id": "2"}'), '200 1 row', 'a post after the database\'s search_path changed');
is(sql(q{SELECT tag || ' | ' || how FROM orders WHERE id = '2'}),
	'x | pg_catalog, pg_temp / cannot create temporary table within security-restricted operation',
	'the table\'s code found pg_catalog.lower, with search_path pg_catalog, restricted');
is(sql(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'dbo'}), 'f',
	'the database\'s owner did not become a superuser');
sql(q{ALTER DATABASE postgres RESET search_path});

# 2. A session-level advisory lock that a table's code takes is released
# with its group, not kept by the worker's session.
sql(q{CREATE FUNCTION public.grab() RETURNS text LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_lock(4242); RETURN 'held'; END $$;
	CREATE FOREIGN TABLE locking (id text, l text DEFAULT public.grab()) SERVER hooks OPTIONS (format 'json')});
is(post('/public/locking', '{"id": "1"}'), '200 1 row', 'a post whose default takes an advisory lock');
is(sql(q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = } . worker_pid()), '0',
	'the worker holds no advisory lock after the group');
is(sql(q{SELECT pg_try_advisory_lock(4242)}), 't', 'another session takes it');

# 3. A value that its type refuses with an error of another class than 22
# (tsquery: 42601, regclass: 42P01) is still the body's fault: 400, and
# the log line does not quote it.
sql(q{CREATE FOREIGN TABLE typed (id text, q tsquery, r regclass) SERVER hooks OPTIONS (format 'json')});
my $log = -s $node->logfile;
is(post('/public/typed', '{"id": "1", "q": "BODYSECRET1 & & y"}'),
	'400 syntax error in tsquery: "BODYSECRET1 & & y" (column "q" of source table "typed", field "q"; the body)',
	'a bad tsquery: 400, saying where');
is(post('/public/typed', '{"id": "2", "r": "bodysecret2"}'),
	'400 relation "bodysecret2" does not exist (column "r" of source table "typed", field "r"; the body)',
	'a regclass of no relation: 400');
is(post('/public/typed', '{"id": "j", "q": {"a": 1}}'),
	'400 cannot convert a JSON object to type tsquery (column "q" of source table "typed", field "q"; the body)',
	'a JSON object for a column of another type: 400');
is(post('/public/typed', '{"id": "3", "q": "a & b", "r": "pg_class"}'), '200 1 row', 'good values: 200');
my $logged = substr(slurp_file($node->logfile), $log);
is(scalar(() = $logged =~ m{request to /postgres/public/typed refused with status 400$}mg), 3,
	'the refusals are logged');
unlike($logged, qr/bodysecret/i, 'the log does not quote the bodies');
is(sql(q{SELECT string_agg(id, ',') FROM typed}), '3', 'only the good one is written');

# 4. A data exception that the table's own code raises while it checks a
# value reaches the client with its message and where in the body, never
# with the code's context (its queries, its functions); another error of
# its code is the server's: 500, and its message only in the log.
sql(q{CREATE TABLE private_t (v text);
	INSERT INTO private_t VALUES ('not-a-number');
	CREATE FUNCTION public.chk(t text) RETURNS bool LANGUAGE plpgsql AS $$
		BEGIN PERFORM (SELECT v FROM public.private_t LIMIT 1)::int; RETURN true; END $$;
	CREATE DOMAIN checked_text AS text CHECK (public.chk(VALUE));
	CREATE FOREIGN TABLE d (id checked_text) SERVER hooks OPTIONS (format 'json')});
is(post('/public/d', '{"id": "probe"}'),
	'400 invalid input syntax for type integer: "not-a-number" (column "id" of source table "d", field "id"; the body)',
	'a domain\'s check that fails: 400, without the context of its function');
is(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'd'::regclass}),
	'400 invalid input syntax for type integer: "not-a-number" (column "id" of source table "d", field "id"; the body)',
	'the same in last_error');
sql(q{CREATE FUNCTION public.chk2(t text) RETURNS bool LANGUAGE plpgsql AS $$
		BEGIN PERFORM 1 FROM public.dropped_t; RETURN true; END $$;
	CREATE DOMAIN broken_text AS text CHECK (public.chk2(VALUE));
	CREATE FOREIGN TABLE d2 (id broken_text) SERVER hooks OPTIONS (format 'json')});
$log = -s $node->logfile;
is(post('/public/d2', '{"id": "probe"}'), '500 the server failed to write the request; its log says why',
	'a domain\'s function that fails on its own (a table it needs is gone): 500');
like(substr(slurp_file($node->logfile), $log),
	qr{request to /postgres/public/d2 refused with status 500: relation "public.dropped_t" does not exist},
	'its message is in the log');
sql(q{CREATE DOMAIN conf_text AS text CHECK (VALUE <> current_setting('app.missing'));
	CREATE FOREIGN TABLE d3 (id conf_text) SERVER hooks OPTIONS (format 'json')});
is(post('/public/d3', '{"id": "probe"}'), '500 the server failed to write the request; its log says why',
	'a domain\'s check that fails on its own with no function of its own (a setting that is not there): 500');

# 5. A privilege revoked from the owner holds for the next request, though
# the worker keeps what it prepared for the table between groups.
sql(q{CREATE ROLE alice; CREATE ROLE bob;
	GRANT USAGE ON FOREIGN SERVER hooks TO alice;
	GRANT CREATE ON SCHEMA public TO alice, bob});
sql_as('bob', q{CREATE FUNCTION public.bobs_fn() RETURNS text LANGUAGE sql AS $$ SELECT 'bobs' $$;
	REVOKE EXECUTE ON FUNCTION public.bobs_fn() FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION public.bobs_fn() TO alice});
sql_as('alice', q{CREATE FOREIGN TABLE granted (id text, v text DEFAULT public.bobs_fn())
	SERVER hooks OPTIONS (format 'json')});
is(post('/public/granted', '{"id": "1"}'), '200 1 row', 'a post to alice\'s table, with bob\'s function');
sql_as('bob', q{REVOKE EXECUTE ON FUNCTION public.bobs_fn() FROM alice});
$log = -s $node->logfile;
is(post('/public/granted', '{"id": "2"}'), '500 the server failed to write the request; its log says why',
	'after bob revoked it: refused');
like(substr(slurp_file($node->logfile), $log),
	qr{request to /postgres/public/granted refused with status 500: permission denied for function bobs_fn},
	'the log says why');
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM granted}), '1:bobs', 'nothing written after the revoke');

# 6. Addresses that are no table, with empty bodies (which the server's
# threads hand over without a look at the map), grow nothing in the
# worker: their names are not looked up in the catalog caches.
sub cache_bytes
{
	my $pid = worker_pid();
	my $from = -s $node->logfile;
	sql("SELECT pg_log_backend_memory_contexts($pid)");
	$node->wait_for_log(qr/level: 1; CacheMemoryContext: .* used$/m, $from);
	my ($bytes) = substr(slurp_file($node->logfile), $from) =~ /level: 1; CacheMemoryContext: .* (\d+) used$/m;
	return $bytes;
}
# 3000 posts with empty bodies to addresses of no table, each its own
# names: how many got 404
my $dir = PostgreSQL::Test::Utils::tempdir();
sub post_nowhere
{
	my ($round) = @_;
	my $config = "$dir/urls-$round";
	open(my $fh, '>', $config) or die "cannot write $config: $!";
	print $fh "url = \"$base/nosuch$round$_/t$_\"\noutput = \"/dev/null\"\n" for 1 .. 3000;
	close $fh;
	my ($out) = run_command([ 'curl', '-s', '-w', '%{http_code}\n', '--data-binary', '',
		'-H', 'Content-Type: application/json', '-K', $config ]);
	return scalar(() = $out =~ /^404$/mg);
}
is(post_nowhere('a'), 3000, '3000 posts to addresses of no table: 404');
my $before = cache_bytes();
is(post_nowhere('b'), 3000, '3000 more, to other addresses');
my $after = cache_bytes();
cmp_ok($after - $before, '<', 64 * 1024, "the worker's catalog caches did not grow with them ($before, then $after bytes used)");
is(post('/public/orders', '{"id": "3"}'), '200 1 row', 'a table is still found');

# 7. The group's commit is bounded by the worker's lock_timeout: stamping
# its batch waits for a lock that DDL holds (CREATE INDEX on the batches),
# for 5 s, and then every request of the group gets 503.
my $blocker = $node->background_psql('postgres', on_error_stop => 1);
$blocker->query_safe(q{BEGIN; LOCK TABLE source_writes.batches IN SHARE MODE});
my $t0 = time();
my ($answer) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '60',
	"$base/public/orders", '--data-binary', '{"id": "locked"}', '-H', 'Content-Type: application/json' ]);
is($answer, "the request could not be committed; send it again\n 503",
	'a commit that waits for a lock longer than lock_timeout: 503');
cmp_ok(time() - $t0, '<', 30, 'after lock_timeout');
$blocker->query_safe('ROLLBACK');
$blocker->quit;
is(sql(q{SELECT count(*) FROM orders WHERE id = 'locked'}), '0', 'nothing of it is written');
is(post('/public/orders', '{"id": "unlocked"}'), '200 1 row', 'once the lock is gone: 200');

# 8. The group's commit waits for synchronous standbys as the server's
# configuration asks, though the database sets synchronous_commit = local.
sql(q{ALTER DATABASE postgres SET synchronous_commit = local});
restart_worker();

# POST {"id": ID} in the background, its answer and status into $$out, once
# the worker waits for the standby
sub post_waiting
{
	my ($id, $out) = @_;
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--max-time', '120',
		"$base/public/orders", '--data-binary', qq({"id": "$id"}),
		'-H', 'Content-Type: application/json' ], '>', $out, '2>', \my $err);
	ok($node->poll_query_until('postgres', q{SELECT wait_event = 'SyncRep' FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server'}), "$id: the worker waits for the standby");
	return $h;
}
sql(q{ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()});
my $out = '';
my $h = post_waiting('sync', \$out);
$h->pump_nb;
is($out, '', 'no answer meanwhile');
sql(q{ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()});
$h->finish;
is($out, "1 row\n 200", 'once no standby is asked for: 200');

# A wait for the standby cut short, by a cancel or by the worker's end,
# leaves the rows committed here only: 200 would say the standby has them,
# 503 would have them sent again.  The connection is closed unanswered, as
# PostgreSQL closes a session whose commit it cannot confirm when it is
# terminated.
sql(q{ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()});
my $pid = worker_pid();
$log = -s $node->logfile;
$out = '';
$h = post_waiting('cancelled', \$out);
sql("SELECT pg_cancel_backend($pid)");
$h->finish;
is($out, ' 000', 'a cancelled wait for the standby: no answer, the connection is closed');
ok($node->wait_for_log(qr/WARNING:  webhook server closed 1 connection without an answer/, $log),
	'the worker says why');
is(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'orders'::regclass}),
	'closed without an answer: committed, but not confirmed by the synchronous standbys',
	'and so does the sources view');
is(sql(q{SELECT count(*) FROM orders WHERE id = 'cancelled'}), '1', 'the row is committed here');
is(worker_pid(), $pid, 'the worker goes on');

# The worker learns that the wait was cut short from PostgreSQL's warning,
# whatever the server would log (log_min_messages = log keeps warnings out)
sql(q{ALTER DATABASE postgres SET log_min_messages = log});
restart_worker();
$pid = worker_pid();
$out = '';
$h = post_waiting('unlogged', \$out);
sql("SELECT pg_cancel_backend($pid)");
$h->finish;
is($out, ' 000', 'with log_min_messages = log too, no answer');
is(sql(q{SELECT count(*) FROM orders WHERE id = 'unlogged'}), '1', 'and the row is committed here');
sql(q{ALTER DATABASE postgres RESET log_min_messages});
restart_worker();
$pid = worker_pid();

$log = -s $node->logfile;
$out = '';
$h = post_waiting('terminated', \$out);
sql("SELECT pg_terminate_backend($pid)");
$h->finish;
is($out, ' 000', 'a wait cut short by the end of the worker: no answer either');
is(sql(q{SELECT count(*) FROM orders WHERE id = 'terminated'}), '1', 'that row is committed here too');
sql(q{ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()});
ok($node->wait_for_log(qr/webhook server listening on/, $log),
	'the worker is started again');
is(post('/public/orders', '{"id": "after"}'), '200 1 row', 'then 200 again');

done_testing();
