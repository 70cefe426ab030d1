# Kafka sources fill themselves from their topics: the launcher runs a
# worker per source, which ingests exactly once while people edit the table,
# keeps what it cannot decode as errors, shows its state, and follows
# CREATE, ALTER and DROP of its source.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'events:4', 'upserts:3', 'pairs:2', 'texts:1', 'csvs:1', 'checks:1' ]);
my $bootstrap = $broker->{bootstrap};
my $node = SwTest::node('kafka', conf => "log_min_messages = debug1\nmax_worker_processes = 24\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

# produce lines "key<TAB>value" to a topic; an empty key or value is none
sub produce { SwTest::produce($broker, @_); }

sub sql { return $node->safe_psql('postgres', $_[0]); }

# poll a query until it returns the expected value (ingestion is waited for
# with wait_for(); this is for the workers' state, which has no such wait)
sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$bootstrap')});

#
# 1. append: every message once, with its metadata
#
produce('events', map { "k$_\t{\"id\": $_, \"note\": \"n$_\", \"extra\": [1, 2]}" } 1 .. 1000);
sql(q{CREATE FOREIGN TABLE events (
	id int, note text, p int OPTIONS (source 'partition'),
	o bigint OPTIONS (source 'offset'), k text OPTIONS (source 'key'),
	t timestamptz OPTIONS (source 'timestamp'), topic text OPTIONS (source 'topic'))
	SERVER k OPTIONS (topic 'events')});
is(sql(q{SELECT source_writes.wait_for('events')}), '', 'wait_for returns once the topic is ingested');
is(sql(q{SELECT count(*), count(DISTINCT id), count(DISTINCT (p, o)) FROM events}),
	'1000|1000|1000', 'each message once');
# the worker reports its activity as any session does: autovacuum sees the inserts
ok($node->poll_query_until('postgres', q{SELECT n_tup_ins >= 1000 FROM pg_stat_all_tables
	WHERE relid = (SELECT current_rel FROM source_writes.source_tables WHERE relid = 'events'::regclass)}),
	'the statistics count the rows the worker inserted');
is(sql(q{SELECT count(*) FROM (SELECT p, min(o), max(o), count(*) FROM events GROUP BY p
	HAVING min(o) <> 0 OR max(o) <> count(*) - 1) gaps}), '0',
	'per partition, offsets 0 .. n-1 without gaps');
is(sql(q{SELECT count(*) FROM events WHERE k <> 'k' || id OR topic <> 'events'
	OR t NOT BETWEEN now() - interval '10 min' AND now() + interval '1 min'}), '0',
	'key, topic and timestamp columns are filled');
is(sql(q{SELECT kind, state, lag, errors, worker_pid IS NOT NULL FROM source_writes.sources
	WHERE source = 'events'::regclass}), 'kafka|running|0|0|t', 'the sources view shows the worker');
is(sql(q{SELECT count(*), sum(next_offset), bool_and(next_offset = high_watermark AND lag = 0)
	FROM source_writes.partitions WHERE source = 'events'::regclass}), '4|1000|t',
	'the partitions view shows each partition caught up');
is(sql(q{SELECT string_agg(DISTINCT origin || ':' || role, ',') FROM source_writes.updates(NULL::events)}),
	"kafka:" . sql('SELECT current_user'), 'ingested batches are of origin kafka, by the table owner');

#
# 2. users edit while ingestion goes on; bad messages are kept as errors
#
sql(q{UPDATE events SET note = 'edited' WHERE id <= 10; DELETE FROM events WHERE id > 990});
produce('events', "b1\tnot json", "b2\t{\"id\": \"abc\"}", "b3\t[1, 2]",
	"g1\t{\"id\": 2001, \"note\": \"after the bad ones\"}");
sql(q{SELECT source_writes.wait_for('events')});
is(sql(q{SELECT count(*), count(*) FILTER (WHERE note = 'edited'), count(*) FILTER (WHERE id = 2001)
	FROM events}), '991|10|1', 'edits stay, ingestion goes on after bad messages');
is(sql(q{SELECT string_agg(convert_from(key, 'UTF8') || ':' || CASE WHEN error LIKE '%' || want || '%' THEN 'ok' ELSE error END, ',' ORDER BY key)
	FROM source_writes.errors e
	JOIN (VALUES ('b1', 'invalid JSON'), ('b2', 'invalid input syntax for type integer'),
	             ('b3', 'not a JSON object')) w(k, want) ON convert_from(e.key, 'UTF8') = w.k
	WHERE source = 'events'::regclass}), 'b1:ok,b2:ok,b3:ok',
	'each bad message is kept with its reason');
is(sql(q{SELECT count(*), bool_and(partition IS NOT NULL AND "offset" IS NOT NULL AND value IS NOT NULL)
	FROM source_writes.errors}), '3|t', 'with its partition, offset and value');
is(sql(q{SELECT errors, lag FROM source_writes.sources WHERE source = 'events'::regclass}), '3|0',
	'the bad messages count as consumed');

# fix the table, and move the errors that now decode into it
sql(q{ALTER FOREIGN TABLE events ALTER COLUMN id TYPE text});
is(sql(q{SELECT source_writes.retry_errors('events')}), '1', 'retry_errors moves what decodes now');
is(sql(q{SELECT count(*) FROM events WHERE id = 'abc'}), '1', 'into the table');
is(sql(q{SELECT count(*) FROM source_writes.errors}), '2', 'the others stay');
sql(q{SELECT source_writes.wait_for('events')});
produce('events', "g2\t{\"id\": \"after alter\"}");
sql(q{SELECT source_writes.wait_for('events')});
is(sql(q{SELECT count(*) FROM events WHERE id = 'after alter'}), '1',
	'the worker took the new column type');
is(sql(q{SELECT count(*), count(DISTINCT (p, o)) FROM events WHERE o IS NOT NULL}), '993|993',
	'still each message once');

#
# 3. upsert: the next message for a key replaces whatever is current
#
produce('upserts', "a\t{\"v\": 1}", "b\t{\"v\": 2}", "c\t{\"v\": 3}", "d\t{\"v\": 4}", "a\t{\"v\": 11}");
sql(q{CREATE FOREIGN TABLE upserts (k text OPTIONS (source 'key'), v int)
	SERVER k OPTIONS (topic 'upserts', envelope 'upsert', key 'k')});
sql(q{SELECT source_writes.wait_for('upserts')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM upserts}), 'a=11,b=2,c=3,d=4',
	'the last message of a key wins');
sql(q{UPDATE upserts SET v = 200 WHERE k = 'b'; DELETE FROM upserts WHERE k = 'c';
	UPDATE upserts SET v = 400 WHERE k = 'd'});
produce('upserts', "b\t{\"v\": 22}", "c\t{\"v\": 33}", "d\t", "zz\t", "a\t");
sql(q{SELECT source_writes.wait_for('upserts')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM upserts}), 'b=22,c=33',
	'a message replaces a user\'s edit, brings back a deleted key; tombstones delete edited and ingested rows');
is(sql(q{SELECT min(n) >= 0 FROM (SELECT sum(diff) OVER (PARTITION BY data ORDER BY ts) n
	FROM source_writes.updates(NULL::upserts)) r}), 't', 'no multiplicity below zero');
produce('upserts', "\t{\"v\": 5}");
sql(q{SELECT source_writes.wait_for('upserts')});
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'upserts'::regclass}),
	qr/null/i, 'a message without a key is kept as an error');

# a key of two columns, from the value's fields (and the same in the
# message key, a JSON object, which names the row)
produce('pairs', "{\"region\": \"eu\", \"id\": 1}\t{\"region\": \"eu\", \"id\": 1, \"v\": \"one\"}",
	"{\"id\": 1, \"region\": \"us\"}\t{\"region\": \"us\", \"id\": 1, \"v\": \"uno\"}",
	"{\"region\": \"eu\", \"id\": 1}\t{\"region\": \"eu\", \"id\": 1, \"v\": \"ein\"}");
sql(q{CREATE FOREIGN TABLE pairs (region text, id int, v text)
	SERVER k OPTIONS (topic 'pairs', envelope 'upsert', key 'region, id')});
sql(q{SELECT source_writes.wait_for('pairs')});
is(sql(q{SELECT string_agg(region || id || '=' || v, ',' ORDER BY region) FROM pairs}),
	'eu1=ein,us1=uno', 'multi-column keys from value fields');
produce('pairs', "{\"region\": \"us\", \"id\": 1}\t");
sql(q{SELECT source_writes.wait_for('pairs')});
is(sql(q{SELECT string_agg(region || id || '=' || v, ',' ORDER BY region) FROM pairs}),
	'eu1=ein', 'a tombstone finds a value-field key in the message key');

#
# 4. formats text and csv
#
produce('texts', "\tfirst line", "\tsecond line");
sql(q{CREATE FOREIGN TABLE texts (body text, o bigint OPTIONS (source 'offset'))
	SERVER k OPTIONS (topic 'texts', format 'text')});
sql(q{SELECT source_writes.wait_for('texts')});
is(sql(q{SELECT string_agg(body, '|' ORDER BY o) FROM texts}), 'first line|second line', 'format text');
produce('csvs', "\t1,\"a, quoted\",2.5", "\t2,plain,", "\t3,too,many,fields");
sql(q{CREATE FOREIGN TABLE csvs (id int, s text, x numeric)
	SERVER k OPTIONS (topic 'csvs', format 'csv')});
sql(q{SELECT source_writes.wait_for('csvs')});
is(sql(q{SELECT string_agg(id || ':' || s || ':' || coalesce(x::text, 'NULL'), '|' ORDER BY id) FROM csvs}),
	'1:a, quoted:2.5|2:plain:NULL', 'format csv, by COPY\'s rules');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'csvs'::regclass}), '1',
	'a bad CSV record is kept as an error');

# stored generated columns are computed, constraints checked, as the owner
sql(q{CREATE FOREIGN TABLE checked (x int CHECK (x > 0), doubled int GENERATED ALWAYS AS (x * 2) STORED)
	SERVER k OPTIONS (topic 'checks')});
sql(q{SELECT source_writes.wait_for('checked')});
produce('checks', "\t{\"x\": 21}", "\t{\"x\": -1}");
sql(q{SELECT source_writes.wait_for('checked')});
is(sql(q{SELECT string_agg(x || '*2=' || doubled, ',') FROM checked}), '21*2=42',
	'generated columns are computed');
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'checked'::regclass}),
	qr/violates check constraint/, 'a row that breaks a constraint is kept as an error');
sql(q{DROP FOREIGN TABLE checked});

#
# 5. where to start: latest, or offsets per partition; applied once
#
sql(q{CREATE FOREIGN TABLE late (id int) SERVER k OPTIONS (topic 'events', start_offset 'latest')});
sql(q{CREATE FOREIGN TABLE picked (id text, p int OPTIONS (source 'partition'), o bigint OPTIONS (source 'offset'))
	SERVER k OPTIONS (topic 'events', start_offset '0:240, 1:250')});
sql(q{SELECT source_writes.wait_for('late'); SELECT source_writes.wait_for('picked')});
is(sql(q{SELECT count(*) FROM late}), '0', 'latest: nothing of what the topic held');
is(sql(q{SELECT count(*) FILTER (WHERE p = 0 AND o < 240), count(*) FILTER (WHERE p = 1 AND o < 250),
	count(*) FILTER (WHERE p = 2 AND o = 0) FROM picked}), '0|0|1',
	'named partitions start at their offsets, the others at the earliest');
produce('events', "n1\t{\"id\": 3001}");
sql(q{SELECT source_writes.wait_for('late')});
is(sql(q{SELECT string_agg(id::text, ',') FROM late}), '3001', 'latest: what comes after');
# a restart resumes from the stored offsets, not from start_offset
$node->restart;
produce('events', "n2\t{\"id\": 3002}");
sql(q{SELECT source_writes.wait_for('late'); SELECT source_writes.wait_for('events')});
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM late}), '3001,3002',
	'after a restart, latest is not applied again');
is(sql(q{SELECT count(*), count(DISTINCT (p, o)) FROM events WHERE o IS NOT NULL}), '995|995',
	'after a restart, nothing ingested twice');

#
# 6. a topic that appears later
#
sql(q{CREATE FOREIGN TABLE appears (id int, p int OPTIONS (source 'partition'))
	SERVER k OPTIONS (topic 'appears')});
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'appears'::regclass},
	'waiting for the topic', 'a source whose topic does not exist says so');
is(sql(q{SELECT source_writes.wait_for('appears', '5 s')}), '', 'wait_for: an absent topic held nothing');
is(SwTest::broker_control($broker, 'create-topic appears 3'), 'ok', 'the topic is created');
produce('appears', map { "k$_\t{\"id\": $_}" } 1 .. 60);
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'appears'::regclass},
	'running', 'the worker finds it');
sql(q{SELECT source_writes.wait_for('appears')});
is(sql(q{SELECT count(*), count(DISTINCT p) FROM appears}), '60|3', 'and ingests all its partitions');

#
# 7. wrong server options show the error; the others go on
#
sql(q{CREATE SERVER nowhere FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '127.0.0.1:1', "rdkafka.socket.connection.setup.timeout.ms" '1000')});
sql(q{CREATE FOREIGN TABLE lost (id int) SERVER nowhere OPTIONS (topic 'events')});
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'lost'::regclass},
	'cannot reach the brokers', 'a source whose brokers cannot be reached says so');
isnt(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'lost'::regclass}), '',
	'with the error');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT source_writes.wait_for('lost', '1 s')});
like($err, qr/did not catch up with its topic within 00:00:01/, 'wait_for fails after its timeout');
produce('events', "n3\t{\"id\": 3003}");
sql(q{SELECT source_writes.wait_for('events')});
is(sql(q{SELECT count(*) FROM events WHERE id = '3003'}), '1', 'the other sources go on');
sql(q{DROP SERVER nowhere CASCADE});

#
# 8. ALTER restarts the worker with the new options; DROP stops it
#
my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'texts'::regclass});
sql(q{ALTER FOREIGN TABLE texts OPTIONS (ADD retain_history '1 hour')});
poll_is(qq{SELECT worker_pid <> $pid FROM source_writes.sources WHERE source = 'texts'::regclass},
	't', 'ALTER FOREIGN TABLE restarts the worker');
produce('texts', "\tthird line");
sql(q{SELECT source_writes.wait_for('texts')});
is(sql(q{SELECT string_agg(body, '|' ORDER BY o) FROM texts}), 'first line|second line|third line',
	'which resumes where it was');
$pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'texts'::regclass});
sql(q{DROP FOREIGN TABLE texts});
poll_is(qq{SELECT count(*) FROM pg_stat_activity WHERE pid = $pid}, '0', 'DROP stops the worker');

# a worker that stops is started again
$pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'csvs'::regclass});
kill 'TERM', $pid;
poll_is(qq{SELECT worker_pid IS NOT NULL AND worker_pid <> $pid FROM source_writes.sources
	WHERE source = 'csvs'::regclass}, 't', 'a stopped worker is started again');

# SIGHUP: the workers reload and go on
sql(q{SELECT pg_reload_conf()});
produce('csvs', "\t4,after reload,1");
sql(q{SELECT source_writes.wait_for('csvs')});
is(sql(q{SELECT count(*) FROM csvs}), '3', 'after a reload, ingestion goes on');

#
# 9. a broker that goes away shows in the state; the worker catches up
#
is(SwTest::broker_control($broker, 'broker-down 1'), 'ok', 'the broker goes down');
($ret, $out, $err) = $node->psql('postgres', q{SELECT source_writes.wait_for('events', '2 s')});
like($err, qr/did not catch up/, 'wait_for times out while the broker is down');
is(SwTest::broker_control($broker, 'broker-up 1'), 'ok', 'the broker comes back');
produce('events', "n4\t{\"id\": 3004}");
sql(q{SELECT source_writes.wait_for('events', '60 s')});
is(sql(q{SELECT count(*) FROM events WHERE id = '3004'}), '1', 'and the worker catches up');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'events'::regclass},
	'running', 'running again');

#
# 10. who sees what
#
sql(q{CREATE ROLE alice; CREATE ROLE bob; GRANT SELECT ON events TO alice;
	GRANT SELECT, DELETE ON upserts TO bob});
is(sql(q{SET ROLE alice; SELECT string_agg(DISTINCT source::text, ',') FROM source_writes.errors}),
	'events', 'a reader of a source sees its errors only');
is(sql(q{SET ROLE alice; SELECT string_agg(source::text, ',' ORDER BY source::text) FROM source_writes.sources}),
	'events', 'and only its own sources');
is(sql(q{SET ROLE alice; DELETE FROM source_writes.errors WHERE source = 'events'::regclass}), '',
	'may not delete them without DELETE on the source');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'events'::regclass}), '2',
	'so nothing was deleted');
is(sql(q{SET ROLE bob; WITH d AS (DELETE FROM source_writes.errors RETURNING source) SELECT string_agg(source::text, ',') FROM d}),
	'upserts', 'whoever may delete from a source deletes its errors, and no others');
my ($r2, $o2, $e2) = $node->psql('postgres', q{SET ROLE bob; SELECT source_writes.retry_errors('events')});
like($e2, qr/permission denied/, 'retry_errors takes INSERT and DELETE on the source');

done_testing();
