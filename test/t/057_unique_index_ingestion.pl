# A unique index of a source table keeps its promise for what the workers
# ingest, and loses nothing.  A Kafka message whose row a unique index of
# the user's refuses (a row of the table has its value, or a message before
# it in the same batch does) is kept in source_writes.errors with the
# violation, the rest of its batch is written, and retry_errors() takes it
# once the conflicting row is gone.  A webhook request whose row a unique
# index refuses is answered 409, naming the index, and writes nothing,
# alone or in a group with good requests, which are written; a repeated
# delivery of a written request is idempotency_header's: 200.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;
use SwTest;

my $broker = SwTest::broker(topics => [ 'uniq:1', 'uniq_up:1' ]);
my $bootstrap = $broker->{bootstrap};
my $port = PostgreSQL::Test::Cluster::get_free_port();
# requests here hold the webhook worker on purpose: no time limit; they may
# join a group for a minute
my $node = SwTest::node('unique', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "source_writes.webhook_request_timeout = 0\n"
	. "source_writes.webhook_join_time = '1min'\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# produce lines "key<TAB>value" to a topic
sub produce { SwTest::produce($broker, @_); }

#
# 1. Kafka, an append source
#
# The messages are in the topic before the source is made, with its index
# and a person's row, in one transaction: its worker's first batch takes
# them all.
produce('uniq', "m0\t{\"id\": 1, \"note\": \"first\"}",
	"m1\t{\"id\": 2, \"note\": \"taken by a person\"}",
	"m2\t{\"id\": 1, \"note\": \"again in the batch\"}",
	"m3\t{\"id\": 4, \"note\": \"after them\"}");
sql(qq{BEGIN;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$bootstrap');
	CREATE FOREIGN TABLE uniq (id int, note text, o bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'uniq');
	CREATE UNIQUE INDEX uniq_id ON uniq (id);
	INSERT INTO uniq (id, note) VALUES (2, 'a person''s');
	COMMIT});
is(sql(q{SELECT source_writes.wait_for('uniq')}), '', 'the topic is ingested');
is(sql(q{SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM uniq}),
	"1:first,2:a person's,4:after them", 'the messages that the index takes are written');
is(sql(q{SELECT count(DISTINCT ts) FROM source_writes.updates(NULL::uniq) WHERE origin = 'kafka'}),
	'1', 'in one batch');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset")
	FROM source_writes.errors WHERE source = 'uniq'::regclass}),
	qq{1: duplicate key value violates unique constraint "uniq_id": Key (id)=(2) already exists.\n}
	  . qq{2: duplicate key value violates unique constraint "uniq_id": Key (id)=(1) already exists.},
	'the message that a row of the table and the one that a message of its batch conflicts with are kept, with the violation');
is(sql(q{SELECT errors, lag FROM source_writes.sources WHERE source = 'uniq'::regclass}), '2|0',
	'they count as consumed');
produce('uniq', "m4\t{\"id\": 5, \"note\": \"later\"}");
sql(q{SELECT source_writes.wait_for('uniq')});
is(sql(q{SELECT count(*) FROM uniq WHERE id = 5}), '1', 'ingestion goes on');

# retry_errors() takes them once the conflicting rows are gone
is(sql(q{SELECT source_writes.retry_errors('uniq')}), '0', 'while the rows are there, nothing moves');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'uniq'::regclass}), '2',
	'the errors stay');
sql(q{DELETE FROM uniq WHERE id = 2});
is(sql(q{SELECT source_writes.retry_errors('uniq')}), '1', 'one moves once its conflicting row is deleted');
sql(q{DELETE FROM uniq WHERE id = 1});
is(sql(q{SELECT source_writes.retry_errors('uniq')}), '1', 'and the other');
is(sql(q{SELECT string_agg(id || ':' || note || ':' || o, ',' ORDER BY id) FROM uniq}),
	'1:again in the batch:2,2:taken by a person:1,4:after them:3,5:later:4',
	'the table holds the kept messages, with their offsets');
is(sql(q{SELECT count(*) FROM source_writes.errors}), '0', 'no errors are left');
is(sql(q{SELECT count(*) FROM uniq WHERE id = 1}), '1', 'the index still keeps its promise');

#
# 2. Kafka, an upsert source with a unique index of the user's beside its
# key: a batch merges each key's messages and writes the last
#
produce('uniq_up', "a\t{\"v\": \"x\"}", "b\t{\"v\": \"y\"}", "b\t{\"v\": \"x\"}",
	"c\t{\"v\": \"w\"}", "b\t{\"v\": \"y2\"}");
sql(q{BEGIN;
	CREATE FOREIGN TABLE uniq_up (k text OPTIONS (source 'key'), v text)
	  SERVER k OPTIONS (topic 'uniq_up', envelope 'upsert', key 'k');
	CREATE UNIQUE INDEX uniq_up_v ON uniq_up (v);
	INSERT INTO uniq_up VALUES ('p', 'x');
	COMMIT});
sql(q{SELECT source_writes.wait_for('uniq_up')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM uniq_up}), 'b=y2,c=w,p=x',
	'a new key whose value a person\'s row has is refused, the other keys are merged');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset")
	FROM source_writes.errors WHERE source = 'uniq_up'::regclass}),
	qq{0: duplicate key value violates unique constraint "uniq_up_v": Key (v)=(x) already exists.},
	'it is kept with the violation');
is(sql(q{SELECT source_writes.retry_errors('uniq_up')}), '0', 'while the row is there, it stays');
sql(q{UPDATE uniq_up SET v = 'x2' WHERE k = 'p'});
is(sql(q{SELECT source_writes.retry_errors('uniq_up')}), '1',
	'retry_errors() takes it once the person\'s row has another value');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM uniq_up}), 'a=x,b=y2,c=w,p=x2',
	'into the table');
is($node->safe_psql('postgres', q{CREATE EXTENSION amcheck;
	SELECT bool_and(bt_index_check(c.oid, true) IS NOT NULL)
	FROM source_writes.indexes i JOIN pg_class c ON c.relname = i.indexname
	WHERE i.tablename IN ('uniq', 'uniq_up')}), 't', 'amcheck finds the indexes clean');

#
# 3. Webhooks
#
# POST with curl, started: returns a sub that waits for the answer and
# gives "status text"
sub start_post
{
	my ($path, $body, @headers) = @_;
	my $o = '';
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--data-binary', $body,
		(map { ('-H', $_) } ('Content-Type: application/json', @headers)), "$base$path" ], '>', \$o);
	return sub {
		$h->finish;
		(my $out = $o) =~ s/\n//g;
		my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
		return "$status $text";
	};
}

sub post { return start_post(@_)->(); }

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE hook (id text, n int) SERVER hooks
	  OPTIONS (format 'json', idempotency_header 'Idempotency-Key');
	CREATE UNIQUE INDEX hook_id ON hook (id);
	CREATE FOREIGN TABLE slow (id int, w text DEFAULT pg_catalog.pg_sleep(1)::text)
	  SERVER hooks OPTIONS (format 'json')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');

is(post('/public/hook', '{"id": "e1", "n": 1}', 'Idempotency-Key: d1'), '200 1 row',
	'a new event: 200');
is(post('/public/hook', '{"id": "e1", "n": 2}', 'Idempotency-Key: d2'),
	'409 duplicate key value violates unique constraint "hook_id" (the body)',
	'another delivery of its id: 409, naming the index');
is(post('/public/hook', qq({"id": "e2", "n": 3}\n{"id": "e1", "n": 4}\n), 'Idempotency-Key: d3'),
	'409 duplicate key value violates unique constraint "hook_id" (line 2 of the body)',
	'a request of two rows, the second a duplicate: 409, saying which');
is(post('/public/hook', qq({"id": "e3", "n": 5}\n{"id": "e3", "n": 6}\n), 'Idempotency-Key: d4'),
	'409 duplicate key value violates unique constraint "hook_id" (line 2 of the body)',
	'a request of two rows with one id: 409');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM hook}), 'e1:1',
	'nothing of the refused requests is written');
is(post('/public/hook', '{"id": "e1", "n": 1}', 'Idempotency-Key: d1'), '200 1 row',
	'a repeated delivery of the written request: 200, the first answer');
is(post('/public/hook', '{"id": "e2", "n": 3}', 'Idempotency-Key: d3'), '200 1 row',
	'a key that was refused may come again, and be written');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM hook}), 'e1:1,e2:3',
	'each written once');

# in a group: a request to the slow table holds the worker, the others join
# its group; the refused one fails alone
my $slow = start_post('/public/slow', '{"id": 1}');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'}),
	'the worker is busy with a slow request');
my @joined;
for my $post ([ '{"id": "g1", "n": 7}', 'Idempotency-Key: g1' ],
	[ '{"id": "e1", "n": 8}', 'Idempotency-Key: g2' ],
	[ '{"id": "g3", "n": 9}', 'Idempotency-Key: g3' ])
{
	push @joined, start_post('/public/hook', @$post);
	Time::HiRes::usleep(50_000);
}
is($slow->(), '200 1 row', 'the slow request is written');
is(join(' | ', map { $_->() } @joined),
	'200 1 row | 409 duplicate key value violates unique constraint "hook_id" (the body) | 200 1 row',
	'in a group, the duplicate is refused with 409 and the others are answered 200');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM hook}), 'e1:1,e2:3,g1:7,g3:9',
	'the good requests of the group are written, the duplicate is not');
is(sql(q{SELECT count(DISTINCT ts) FROM source_writes.updates(NULL::hook) WHERE (data).id IN ('g1', 'g3')}),
	'1', 'in one batch');
is(sql(q{SELECT bt_index_check(c.oid, true) IS NOT NULL FROM pg_class c WHERE relname = 'hook_id'}),
	't', 'amcheck finds the index clean');

done_testing();
