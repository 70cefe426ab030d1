# envelope 'debezium': change events as Debezium writes them (JSON, with
# its schema/payload wrapper or without), keyed by the message key: c, r
# and u make the after image the key's row, d and tombstones delete it, a
# delete of an absent key does nothing; a person's edit is replaced by the
# next event of its key, and the log never holds a negative multiplicity;
# the envelope's parts as columns; bad events kept as errors.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'dbserver1.public.customers:2' ]);
my $node = SwTest::node('debezium', conf => "restart_after_crash = on\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# events as Debezium's PostgreSQL connector writes them (its documentation's
# layout), with the JSON converter's schema/payload wrapper
my $key_schema = '{"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}], "optional": false, "name": "dbserver1.public.customers.Key"}';
my $value_schema = '{"type": "struct", "fields": [], "optional": false, "name": "dbserver1.public.customers.Envelope"}';
my $source = '{"version": "2.5.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": 1700000000000, "snapshot": "false", "db": "postgres", "schema": "public", "table": "customers", "txId": 555, "lsn": 24023128, "xmin": null}';

sub key { return qq({"schema": $key_schema, "payload": {"id": $_[0]}}); }

sub event
{
	my ($op, $before, $after, $ts) = @_;
	return qq({"schema": $value_schema, "payload": {"before": $before, "after": $after, "source": $source, "op": "$op", "ts_ms": $ts, "transaction": null}});
}

sub row { my ($id, $name, $email) = @_; return qq({"id": $id, "name": "$name", "email": "$email"}); }

sub produce { SwTest::produce($broker, 'dbserver1.public.customers', @_); }

produce(
	key(1) . "\t" . event('r', 'null', row(1, 'Ann', 'ann@example.com'), 1700000000001),
	key(2) . "\t" . event('c', 'null', row(2, 'Bob', 'bob@example.com'), 1700000000002),
	key(3) . "\t" . event('c', 'null', row(3, 'Cy', 'cy@example.com'), 1700000000003),
	key(1) . "\t" . event('u', row(1, 'Ann', 'ann@example.com'), row(1, 'Ann', 'ann@new.example'), 1700000000004),
	key(2) . "\t" . event('d', row(2, 'Bob', 'bob@example.com'), 'null', 1700000000005),
	key(2) . "\t");

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE customers (
	  id int, name text, email text,
	  op text OPTIONS (source 'op'),
	  before jsonb OPTIONS (source 'before'),
	  src jsonb OPTIONS (source 'source'),
	  changed timestamptz OPTIONS (source 'ts_ms'),
	  ts bigint OPTIONS (source 'ts_ms'))
	SERVER k OPTIONS (topic 'dbserver1.public.customers', envelope 'debezium', key 'id')});
is(sql(q{SELECT source_writes.wait_for('customers')}), '', 'the change events are ingested');
is(sql(q{SELECT id, name, email, op FROM customers ORDER BY id}),
	"1|Ann|ann\@new.example|u\n3|Cy|cy\@example.com|c",
	'c, r and u make the after image the row; d and the tombstone delete it');
is(sql(q{SELECT before->>'email', src->>'table', src->>'lsn', ts, changed = to_timestamp(ts / 1000.0)
	FROM customers WHERE id = 1}),
	'ann@example.com|customers|24023128|1700000000004|t',
	'the before image, the source and ts_ms as columns');

# a person's edits, then the next events of their keys
sql(q{UPDATE customers SET email = 'cy@fixed.example' WHERE id = 3;
	DELETE FROM customers WHERE id = 1});
produce(
	key(3) . "\t" . event('u', row(3, 'Cy', 'cy@example.com'), row(3, 'Cyd', 'cy@example.com'), 1700000000006),
	key(1) . "\t" . event('d', row(1, 'Ann', 'ann@new.example'), 'null', 1700000000007),
	key(1) . "\t",
	key(9) . "\t" . event('d', row(9, 'Nobody', 'n@example.com'), 'null', 1700000000008),
	# without the wrapper (schemas.enable=false)
	qq({"id": 4}\t{"before": null, "after": {"id": 4, "name": "Dee", "email": "dee\@example.com"}, "source": $source, "op": "c", "ts_ms": 1700000000009}));
is(sql(q{SELECT source_writes.wait_for('customers')}), '', 'more events');
is(sql(q{SELECT id, name, email FROM customers ORDER BY id}),
	"3|Cyd|cy\@example.com\n4|Dee|dee\@example.com",
	"an update replaces a person's edit of its row; a delete of a row a person deleted, or of a key never seen, does nothing");
is(sql(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::customers)
	GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0',
	'the log holds no negative multiplicity');
is(sql(q{SELECT string_agg(origin || ' ' || diff, ',' ORDER BY ts, diff) FROM source_writes.updates(NULL::customers)
	WHERE (data).id = 3}),
	'kafka 1,user -1,user 1,kafka -1,kafka 1',
	'the log has the event, the edit, and the event that replaced it');

# bad events: kept as errors that say why
produce(
	key(5) . "\t" . qq({"schema": $value_schema, "payload": {"before": null, "after": {"id": 5}, "source": $source, "ts_ms": 1}}),
	key(6) . "\t" . event('u', row(6, 'F', 'f'), 'null', 2),
	key(7) . "\t" . '[1, 2]');
is(sql(q{SELECT source_writes.wait_for('customers')}), '', 'bad events');
is(sql(q{SELECT string_agg(error, E'\n' ORDER BY error) FROM source_writes.errors WHERE source = 'customers'::regclass}),
	"Debezium change event has no \"op\" (message value for source table \"customers\"): An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".\n"
	. "Debezium change event is not a JSON object (message value for source table \"customers\")\n"
	. "Debezium change event of op 'u' has no \"after\" (message value for source table \"customers\"): Its after image is the row of its key.",
	'an event without op, a u without after, one that is not an object: kept, saying why');
is(sql(q{SELECT count(*) FROM customers}), '2', 'and they wrote nothing');

# a truncate event retracts every row there is at its place, a person's
# too, and those of the events before it (in its batch or earlier); the
# events after it stay (one partition: the events' order is the topic's)
SwTest::broker_control($broker, 'create-topic one 1');
sql(q{CREATE FOREIGN TABLE one (id int, name text, email text) SERVER k
	OPTIONS (topic 'one', envelope 'debezium', key 'id')});
SwTest::produce($broker, 'one',
	key(1) . "\t" . event('c', 'null', row(1, 'A', 'a'), 1),
	qq(\t{"schema": $value_schema, "payload": {"before": null, "after": null, "source": $source, "op": "t", "ts_ms": 2}}),
	key(2) . "\t" . event('c', 'null', row(2, 'B', 'b'), 3));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'events around a truncate');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM one}), '2',
	'the truncate retracted the row before it; the one after it stays');
sql(q{INSERT INTO one (id, name, email) VALUES (100, 'typed', 'by@hand')});
SwTest::produce($broker, 'one',
	qq(\t{"payload": {"before": null, "after": null, "source": $source, "op": "t", "ts_ms": 4}, "schema": $value_schema}),
	key(3) . "\t" . event('c', 'null', row(3, 'C', 'c'), 5));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'a truncate in a later batch');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM one}), '3',
	"it retracts a person's row and those of earlier batches");
is(sql(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::one)
	GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0', 'with no negative multiplicity');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'one'::regclass}), '0',
	'and no error kept');

# a truncate first and last in a batch, two in one batch, a d then a c of
# one key in one batch
SwTest::produce($broker, 'one',
	qq(\t{"payload": {"before": null, "after": null, "source": $source, "op": "t", "ts_ms": 6}}),
	key(4) . "\t" . event('c', 'null', row(4, 'D', 'd'), 7),
	key(4) . "\t" . event('d', row(4, 'D', 'd'), 'null', 8),
	key(4) . "\t",
	key(4) . "\t" . event('c', 'null', row(4, 'D2', 'd2'), 9),
	key(5) . "\t" . event('c', 'null', row(5, 'E', 'e'), 10),
	qq(\t{"payload": {"op": "t", "before": null, "after": null, "source": $source, "ts_ms": 11}}),
	key(6) . "\t" . event('c', 'null', row(6, 'F', 'f'), 12),
	qq(\t{"payload": {"op": "t", "before": null, "after": null, "source": $source, "ts_ms": 13}}),
	key(7) . "\t" . event('r', 'null', row(7, 'G', 'g'), 14),
	key(7) . "\t" . event('d', row(7, 'G', 'g'), 'null', 15),
	key(7) . "\t" . event('c', 'null', row(7, 'G2', 'g2'), 16),
	key(8) . "\t" . event('c', 'null', row(8, 'H', 'h'), 17),
	qq(\t{"payload": {"op": "t", "before": null, "after": null, "source": $source, "ts_ms": 18}}));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'truncates first and last in a batch');
is(sql(q{SELECT count(*) FROM one}), '0', 'the last truncate leaves nothing');
SwTest::produce($broker, 'one',
	key(7) . "\t" . event('d', row(7, 'G', 'g'), 'null', 19),
	key(7) . "\t" . event('c', 'null', row(7, 'G3', 'g3'), 20));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'a d then a c of one key');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM one}), '7G3',
	'the c after the d of the same batch stays');
is(sql(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::one)
	GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0', 'still no negative multiplicity');

# a truncate while a person's edit is open: the worker waits for it, as a
# TRUNCATE would, then retracts it too and goes on
my $session = $node->background_psql('postgres');
$session->query_safe(q{BEGIN; INSERT INTO one (id, name, email) VALUES (200, 'open', 'edit')});
SwTest::produce($broker, 'one',
	key(8) . "\t" . event('c', 'null', row(8, 'H', 'h'), 21),
	qq(\t{"payload": {"op": "t", "before": null, "after": null, "source": $source, "ts_ms": 22}}),
	key(9) . "\t" . event('c', 'null', row(9, 'I', 'i'), 23));
ok($node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks
	WHERE relation = 'one'::regclass AND mode = 'ExclusiveLock' AND NOT granted}),
	'the worker waits for the open edit');
$session->query_safe('COMMIT');
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'and goes on once it commits');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM one}), '9',
	'the truncate retracted the edit that committed before it');

# kill -9 of the worker while it waits in the middle of a batch with a
# truncate: after the restart, nothing of it is lost or doubled
$session->query_safe(q{BEGIN; INSERT INTO one (id, name, email) VALUES (201, 'open', 'edit')});
SwTest::produce($broker, 'one',
	key(10) . "\t" . event('c', 'null', row(10, 'J', 'j'), 24),
	qq(\t{"payload": {"op": "t", "before": null, "after": null, "source": $source, "ts_ms": 25}}),
	key(11) . "\t" . event('c', 'null', row(11, 'K', 'k'), 26));
ok($node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks
	WHERE relation = 'one'::regclass AND mode = 'ExclusiveLock' AND NOT granted}),
	'the worker waits again');
my $worker = sql(q{SELECT pid FROM pg_locks
	WHERE relation = 'one'::regclass AND mode = 'ExclusiveLock' AND NOT granted});
my $from = -s $node->logfile;
kill 'KILL', $worker;
SwTest::wait_for_restart($node, $from);
$session->{run}->kill_kill if $session->{run};
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'the events are taken after the restart');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM one}), '11',
	'once: the row after the truncate, and nothing else');
is(sql(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::one)
	GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0', 'no negative or doubled multiplicity');

# fields with escapes and unicode, a nested JSON column, ops that are not
# one of Debezium's letters
SwTest::broker_control($broker, 'create-topic odd 1');
sql(q{CREATE FOREIGN TABLE odd (id int, name text, doc jsonb, raw json) SERVER k
	OPTIONS (topic 'odd', envelope 'debezium', key 'id')});
SwTest::produce($broker, 'odd',
	qq({"id": 1}\t{"op": "c", "after": {"id": 1, "name": "Zo\xc3\xab \\"q\\" \\\\ \\u00e9\\t.", "doc": {"a": [1, {"b": null}], "op": "t"}, "raw": null}}),
	qq({"id": 2}\t{"op": "c", "after": {"id": 2, "name": "nul", "doc": null, "raw": {"s": "a\\u0000b"}}}),
	qq({"id": 3}\t{"op": "create", "after": {"id": 3}}),
	qq({"id": 4}\t{"op": 1, "after": {"id": 4}}),
	qq({"id": 5}\t{"schema": null, "payload": null}));
is(sql(q{SELECT source_writes.wait_for('odd')}), '', 'odd events');
is(sql(q{SELECT id, name, doc, raw FROM odd ORDER BY id}),
	qq(1|Zo\xc3\xab "q" \\ \xc3\xa9\t.|{"a": [1, {"b": null}], "op": "t"}|\n2|nul||{"s": "a\\u0000b"}),
	'escapes, unicode, a nested JSON column (an "op" in it is not the event\'s), a json \\u0000');
is(sql(q{SELECT string_agg(error, E'\n' ORDER BY error) FROM source_writes.errors WHERE source = 'odd'::regclass}),
	"Debezium change event has an unknown op \"create\" (message value for source table \"odd\"): An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".\n"
	. "Debezium change event has an unknown op 1 (message value for source table \"odd\"): An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".\n"
	. "Debezium change event has no \"op\" (message value for source table \"odd\"): An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".",
	'ops "create" and 1, and a null payload, are kept as errors');

# a kept error, retried after ALTER FOREIGN TABLE; big events and keys
SwTest::broker_control($broker, 'create-topic retry 1');
sql(q{CREATE FOREIGN TABLE retry (id int, n int, big text) SERVER k
	OPTIONS (topic 'retry', envelope 'debezium', key 'id')});
my $mb = 'x' x 300_000;	# the test producer's limit is 1 MB a message
SwTest::produce($broker, 'retry',
	qq({"id": 1}\t{"op": "c", "after": {"id": 1, "n": "one", "big": null}}),
	qq({"schema": {"doc": "$mb"}, "payload": {"id": 2}}\t{"op": "c", "after": {"id": 2, "n": 2, "big": "$mb"}, "source": {"doc": "$mb"}}),
	qq({"id": 3}\t{"op": "c", "after": {"id": 3, "n": 3, "big": null}}),
	qq({"id": 3}\t{"op": "d", "before": {"id": 3, "n": 3, "big": "$mb"}, "after": null}));
is(sql(q{SELECT source_writes.wait_for('retry')}), '', 'big events');
is(sql(q{SELECT string_agg(id || ':' || length(big), ',' ORDER BY id) FROM retry}), '2:300000',
	'a big key and value; a big delete');
sql(q{ALTER FOREIGN TABLE retry ALTER n TYPE text});
is(sql(q{SELECT source_writes.retry_errors('retry')}), '1', 'the kept event is retried');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM retry}), '1:one,2:2',
	'its row is there');

# a hostile event: a value nested 100000 deep is kept as an error (the
# stack's limit), and the events after it are taken
SwTest::broker_control($broker, 'create-topic deep 1');
sql(q{CREATE FOREIGN TABLE deep (id int, x jsonb) SERVER k
	OPTIONS (topic 'deep', envelope 'debezium', key 'id')});
SwTest::produce($broker, 'deep',
	qq({"id": 1}\t{"op": "c", "after": {"id": 1, "x": ) . ('[' x 100000) . (']' x 100000) . '}}',
	qq({"id": 2}\t{"op": "c", "after": {"id": 2, "x": 2}}));
is(sql(q{SELECT source_writes.wait_for('deep')}), '', 'a deep event');
is(sql(q{SELECT string_agg(id::text, ',') FROM deep}), '2', 'the event after it is taken');
like(sql(q{SELECT string_agg(error, E'\n') FROM source_writes.errors WHERE source = 'deep'::regclass}),
	qr/stack depth limit exceeded/, 'the deep one is kept as an error');

# what the options allow
my ($rc, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE t (id int, op text OPTIONS (source 'op'))
	SERVER k OPTIONS (topic 'x', envelope 'upsert', key 'id')});
like($err, qr/column "op" takes a part of a change event, which only envelope 'debezium' has/,
	'the envelope columns only with envelope debezium');
($rc, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE t (id int) SERVER k
	OPTIONS (topic 'x', envelope 'debezium')});
like($err, qr/option "key" is required/, 'envelope debezium needs the key');

done_testing();
