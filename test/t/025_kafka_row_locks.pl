# A row that a person locks (SELECT ... FOR UPDATE) holds up the ingestion
# of its key, as it would hold up INSERT ... ON CONFLICT, and the source
# says so: its state names the process it waits for, until the lock goes.
# Errors of lock waits (a lock timeout, a deadlock) and rows that ingestion
# cannot write speak of the source table, never of its hidden storage, and
# read as they would for a plain table.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'held:1', 'big:1' ]);
my $bootstrap = $broker->{bootstrap};
my $node = SwTest::node('row_locks', conf => "max_worker_processes = 16\n");

sub produce { SwTest::produce($broker, @_); }

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$bootstrap');
	CREATE FOREIGN TABLE held (k text OPTIONS (source 'key'), v int)
	  SERVER k OPTIONS (topic 'held', envelope 'upsert', key 'k');
	CREATE TABLE plain (k text PRIMARY KEY, v int)});
produce('held', "a\t{\"v\": 1}", "b\t{\"v\": 2}");
sql(q{SELECT source_writes.wait_for('held')});
sql(q{INSERT INTO plain SELECT * FROM held});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM held}), 'a=1,b=2', 'ingested');

#
# 1. a person locks key a: ingestion of a waits, and the source says for whom
#
my $holder = $node->background_psql('postgres');
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
$holder->query_safe(q{BEGIN; SELECT * FROM held WHERE k = 'a' FOR UPDATE});
produce('held', "a\t{\"v\": 10}", "c\t{\"v\": 3}");
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'held'::regclass},
	"waiting for a lock held by process $holder_pid",
	'the state says that ingestion waits, and for which process');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM held}), 'a=1,b=2',
	'the locked row keeps its value, and the partition waits behind it');

#
# 2. meanwhile, a lock timeout of a person's UPDATE of a row the holder
# locked reads as it does for a plain table, with the source's name
#
sub normalized
{
	my ($err, $table) = @_;
	$err =~ s/\b\Q$table\E\b/TABLE/g;
	$err =~ s/\(\d+,\d+\)/(B,O)/g;
	$err =~ s/\d+/N/g;
	return $err;
}

$holder->query_safe(q{SELECT * FROM held WHERE k = 'b' FOR UPDATE;
	SELECT * FROM plain WHERE k = 'b' FOR UPDATE});
my %timeout;
for my $table ('held', 'plain')
{
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET lock_timeout = '100ms'; UPDATE $table SET v = 0 WHERE k = 'b'");
	$timeout{$table} = $err;
}
like($timeout{held}, qr/canceling statement due to lock timeout\nCONTEXT:  while updating tuple \(\d+,\d+\) in relation "held"/,
	'a lock timeout on a source names the source in its context');
is(normalized($timeout{held}, 'held'), normalized($timeout{plain}, 'plain'),
	'... as it would a plain table');
unlike($timeout{held}, qr/current_|history_|source_writes_internal/, '... and nothing of its storage');

#
# 3. the person commits: the upsert goes on, and the source is running again
#
$holder->query_safe('COMMIT');
sql(q{SELECT source_writes.wait_for('held')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM held}), 'a=10,b=2,c=3',
	'the waiting message replaced the row, and the next one came');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'held'::regclass},
	'running', 'the source is running again');

#
# 4. a deadlock between two people's edits: the victim's error reads as for
# a plain table
#
my %deadlock;
for my $table ('held', 'plain')
{
	my $first = $node->background_psql('postgres');
	my $second = $node->background_psql('postgres', on_error_stop => 0);
	my $first_pid = $first->query_safe(q{SET deadlock_timeout = '60s'; SELECT pg_backend_pid()});
	$first->query_safe("BEGIN; UPDATE $table SET v = v + 1 WHERE k = 'a'");
	$second->query_safe("SET deadlock_timeout = '10ms'; BEGIN; UPDATE $table SET v = v + 1 WHERE k = 'b'");
	$first->query_until(qr/waiting/, "\\echo waiting\nUPDATE $table SET v = v + 1 WHERE k = 'b';\n");
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $first_pid")
	  or die "the first session does not wait";
	$second->query("UPDATE $table SET v = v + 1 WHERE k = 'a'");
	$deadlock{$table} = $second->{stderr};
	$second->{stderr} = '';
	$second->query_safe('ROLLBACK');
	$first->query_safe('COMMIT');
	$first->quit;
	$second->quit;
}
like($deadlock{held}, qr/deadlock detected.*CONTEXT:  while updating tuple \(\d+,\d+\) in relation "held"/s,
	'a deadlock on a source names the source in its context');
is(normalized($deadlock{held}, 'held'), normalized($deadlock{plain}, 'plain'),
	'... as it would a plain table');

#
# 5. a message that ingestion cannot write (its key is too big for the
# key's index) is kept with a reason that names the source, not its index
#
sql(q{CREATE FOREIGN TABLE big (k text, v int) SERVER k OPTIONS (topic 'big', envelope 'upsert', key 'k')});
my @chars = ('a' .. 'z', 'A' .. 'Z', '0' .. '9');
my $huge = join('', map { $chars[ int(rand(@chars)) ] } 1 .. 4000);
produce('big', "$huge\t{\"k\": \"$huge\", \"v\": 1}", "small\t{\"k\": \"small\", \"v\": 2}");
sql(q{SELECT source_writes.wait_for('big', '60 s')});
my $reason = sql(q{SELECT error FROM source_writes.errors WHERE source = 'big'::regclass});
like($reason, qr/index row .* "big"/, 'the reason of a row the key index refuses names the source');
unlike($reason, qr/current_|history_|source_writes_internal/, '... and nothing of its storage');

$holder->quit;
done_testing();
