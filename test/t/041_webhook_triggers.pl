# Webhook rows keep what a person's rows keep.  The worker fires the
# table's triggers enabled REPLICA or ALWAYS (not ordinary ones), as the
# table's owner, restricted: a BEFORE row trigger may change a row or skip
# it (the answer counts the rows written), an error it raises answers 400
# in classes 22 and 23 and 500 otherwise, writing nothing of the request;
# AFTER row triggers see the rows written; statement triggers fire once per
# batch, timed as requests are.  A source that is a partition refuses rows
# outside its bounds with 400 and PostgreSQL's message.  The worker writes
# at READ COMMITTED whatever the database's default isolation.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('webhook_triggers',
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST a JSON body: "<status> <answer>", the answer on one line
sub post
{
	my ($path, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', "$base$path",
		'--data-binary', $body, '-H', 'Content-Type: application/json' ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE ROLE alice;
	GRANT USAGE ON FOREIGN SERVER hooks TO alice;
	CREATE SCHEMA a AUTHORIZATION alice;
	SET ROLE alice;
	CREATE TABLE a.fired (n serial, tg text, event text, who text, path text, xid bigint,
		id int, v text);
	CREATE FUNCTION a.note() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO a.fired (tg, event, who, path, xid, id, v)
		VALUES (TG_NAME, TG_WHEN || ' ' || TG_OP || ' ' || TG_LEVEL, current_user,
			current_setting('search_path'), txid_current(),
			CASE WHEN TG_LEVEL = 'ROW' THEN NEW.id END, CASE WHEN TG_LEVEL = 'ROW' THEN NEW.v END);
		IF TG_LEVEL = 'STATEMENT' THEN
			RETURN NULL;
		ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'skip' THEN
			RETURN NULL;
		ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'upper' THEN
			NEW.v := 'UPPER';
		ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'reject' THEN
			RAISE EXCEPTION 'rejected by the trigger' USING ERRCODE = 'check_violation';
		ELSIF TG_WHEN = 'AFTER' AND NEW.v = 'boom' THEN
			RAISE EXCEPTION 'the trigger failed';
		END IF;
		RETURN NEW;
	END $$;
	CREATE FOREIGN TABLE a.wh (id int, v text) SERVER hooks OPTIONS (format 'json');
	CREATE TRIGGER b_replica BEFORE INSERT ON a.wh FOR EACH ROW EXECUTE FUNCTION a.note();
	CREATE TRIGGER a_always AFTER INSERT ON a.wh FOR EACH ROW EXECUTE FUNCTION a.note();
	CREATE TRIGGER s_before BEFORE INSERT ON a.wh FOR EACH STATEMENT EXECUTE FUNCTION a.note();
	CREATE TRIGGER s_after AFTER INSERT ON a.wh FOR EACH STATEMENT EXECUTE FUNCTION a.note();
	CREATE TRIGGER ordinary BEFORE INSERT ON a.wh FOR EACH ROW EXECUTE FUNCTION a.note();
	ALTER FOREIGN TABLE a.wh ENABLE REPLICA TRIGGER b_replica;
	ALTER FOREIGN TABLE a.wh ENABLE ALWAYS TRIGGER a_always;
	ALTER FOREIGN TABLE a.wh ENABLE ALWAYS TRIGGER s_before;
	ALTER FOREIGN TABLE a.wh ENABLE REPLICA TRIGGER s_after});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');

#
# 1. Which triggers fire, as whom, what they do to the rows and the answers
#
is(post('/a/wh', '{"id": 1, "v": "one"}'), '200 1 row', 'a post');
is(sql(q{SELECT string_agg(tg || ' ' || event || ' ' || who || ' ' || path || ' ' || coalesce(v, '-'), '; ' ORDER BY n)
	FROM a.fired}),
	's_before BEFORE INSERT STATEMENT alice pg_catalog, pg_temp -; '
	. 'b_replica BEFORE INSERT ROW alice pg_catalog, pg_temp one; '
	. 'a_always AFTER INSERT ROW alice pg_catalog, pg_temp one; '
	. 's_after AFTER INSERT STATEMENT alice pg_catalog, pg_temp -',
	'REPLICA and ALWAYS triggers fire, as the owner, restricted; the ordinary one does not');
is(post('/a/wh', '{"id": 2, "v": "skip"}'), '200 0 rows', 'a row the BEFORE trigger skips is not counted');
is(post('/a/wh', qq({"id": 3, "v": "upper"}\n{"id": 4, "v": "skip"}\n{"id": 5, "v": "five"}\n)),
	'200 2 rows', 'NDJSON: each line goes through the triggers');
is(sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM a.wh}), '1=one,3=UPPER,5=five',
	'the rows as the BEFORE trigger left them');
is(sql(q{SELECT count(*) FROM a.fired f JOIN a.wh w USING (id)
	WHERE f.tg = 'a_always' AND f.v IS DISTINCT FROM w.v}), '0',
	'AFTER row triggers see the rows as written');
is(sql(q{SELECT count(*) FROM (SELECT xid FROM a.fired GROUP BY xid
	HAVING count(*) FILTER (WHERE tg = 's_before') <> 1
	    OR count(*) FILTER (WHERE tg = 's_after') <> 1) b}), '0',
	'statement triggers fire once in each batch');

like(post('/a/wh', '{"id": 6, "v": "reject"}'), qr/^400 rejected by the trigger/,
	'a trigger\'s check_violation answers 400 with its message');
like(post('/a/wh', '{"id": 7, "v": "boom"}'), qr/^500 /,
	'another error of a trigger answers 500');
is(sql(q{SELECT count(*) FROM a.wh WHERE id IN (6, 7)}), '0', 'neither wrote its row');
is(post('/a/wh', '{"id": 8, "v": "eight"}'), '200 1 row', 'the next request is written');

sql(q{TRUNCATE a.fired; INSERT INTO a.wh VALUES (9, 'by a person')});
is(sql(q{SELECT string_agg(tg, ',' ORDER BY n) FROM a.fired}), 's_before,ordinary,a_always',
	'a person\'s INSERT fires the ordinary and ALWAYS triggers, not the REPLICA ones');
is(sql(q{SELECT string_agg(DISTINCT origin || ':' || role, ',' ORDER BY origin || ':' || role)
	FROM source_writes.updates(NULL::a.wh)}), 'user:' . sql('SELECT current_user') . ',webhook:alice',
	'the log: posted rows by the owner');

# statement triggers run at the start and the end of the table's batch in
# a group, timed as a request is: a slow one fails its group (503), and
# cannot hold the worker up past the limit
sql(q{SET ROLE alice;
	CREATE FUNCTION a.slow() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_sleep(10);
		RETURN NULL;
	END $$;
	CREATE FOREIGN TABLE a.slow_wh (id int) SERVER hooks OPTIONS (format 'json');
	CREATE TRIGGER slow BEFORE INSERT ON a.slow_wh FOR EACH STATEMENT EXECUTE FUNCTION a.slow();
	ALTER FOREIGN TABLE a.slow_wh ENABLE ALWAYS TRIGGER slow});
my $start = time();
like(post('/a/slow_wh', '{"id": 1}'), qr/^503 /, 'a statement trigger past the time limit: 503');
my $took = time() - $start;
ok($took < 5, "answered once the limit ran out, not after the trigger ($took s)");
is(post('/a/wh', '{"id": 10, "v": "ten"}'), '200 1 row', 'other tables are written as before');
is(sql(q{SELECT count(*) FROM a.slow_wh}), '0', 'the slow table wrote nothing');

#
# 2. A source that is a partition keeps its bounds
#
sql(q{CREATE TABLE pp (id int, v text) PARTITION BY RANGE (id);
	CREATE TABLE pp_low PARTITION OF pp FOR VALUES FROM (0) TO (100);
	CREATE FOREIGN TABLE pp_src PARTITION OF pp FOR VALUES FROM (100) TO (200)
	  SERVER hooks OPTIONS (format 'json')});
is(post('/public/pp_src', '{"id": 999, "v": "out"}'),
	'400 new row for relation "pp_src" violates partition constraint (the body)',
	'a row outside the bounds: 400, with PostgreSQL\'s message');
like(post('/public/pp_src', '{"v": "no id"}'), qr/^400 new row for relation "pp_src" violates partition constraint/,
	'a NULL partition key too');
is(post('/public/pp_src', '{"id": 150, "v": "in"}'), '200 1 row', 'a row within them is written');
is(sql(q{SELECT string_agg(tableoid::regclass || ' ' || id || ' ' || v, ',') FROM pp}), 'pp_src 150 in',
	'and found through the parent');

#
# 3. A database and a role (the worker's) whose default isolation is
# serializable: the worker writes at READ COMMITTED all the same
#
sql(q{ALTER DATABASE postgres SET default_transaction_isolation = 'serializable';
	ALTER ROLE CURRENT_USER SET default_transaction_isolation = 'serializable';
	CREATE FOREIGN TABLE iso (id int, iso text DEFAULT current_setting('transaction_isolation'))
	  SERVER hooks OPTIONS (format 'json')});
my $log = -s $node->logfile;
sql(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server'});
ok($node->wait_for_log(qr/webhook server listening on/, $log),
	'the worker starts again, with the new defaults');
is(post('/public/iso', '{"id": 1}'), '200 1 row', 'a post');
is(sql(q{SELECT iso FROM iso}), 'read committed', 'written at READ COMMITTED');
sql(q{ALTER DATABASE postgres RESET default_transaction_isolation;
	ALTER ROLE CURRENT_USER RESET default_transaction_isolation});

done_testing();
