# Each committed batch notifies the source's channel with the new upper, so
# a client can follow the log without polling; rolled back edits notify
# nothing.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('notify');
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE events (id int) SERVER k OPTIONS (topic 'events');
	CREATE FOREIGN TABLE other (id int) SERVER k OPTIONS (topic 'other');
});
my $channel = $node->safe_psql('postgres', q{SELECT source_writes.channel('events')});
my $oid = $node->safe_psql('postgres', q{SELECT 'events'::regclass::oid});
is($channel, "source_writes_$oid", 'the channel is source_writes_<oid>');

my $listener = $node->background_psql('postgres');
$listener->query_safe(qq{LISTEN "$channel"});

# notifications reach psql's output when it next talks to the server
sub notifications
{
	my $out = $listener->query_safe('SELECT 1');
	my @got;
	while ($out =~ /Asynchronous notification "([^"]+)" with payload "([^"]*)"/g)
	{
		push @got, [ $1, $2 ];
	}
	return @got;
}

$node->safe_psql('postgres', 'INSERT INTO events VALUES (1), (2)');
my @got = notifications();
is(scalar(@got), 1, 'one notification for one batch');
is($got[0][0], $channel, 'on the source\'s channel');
my $upper = $node->safe_psql('postgres', q{SELECT upper FROM source_writes.frontiers('events')});
is($got[0][1], $upper, 'the payload is the new upper');

# a transaction over two sources notifies each of them once
$node->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO events VALUES (3);
	UPDATE events SET id = id + 10;
	INSERT INTO other VALUES (1);
	COMMIT;
});
@got = notifications();
is(scalar(@got), 1, 'one notification for the listened source');
$upper = $node->safe_psql('postgres', q{SELECT upper FROM source_writes.frontiers('events')});
is($got[0][1], $upper, 'with its new upper');

# rolled back edits, and other sources, notify nothing here
$node->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO events VALUES (4);
	ROLLBACK;
	INSERT INTO other VALUES (2);
	DELETE FROM events WHERE false;
});
@got = notifications();
is(scalar(@got), 0, 'nothing for rollbacks, other sources and empty statements');

# the listener can catch up with updates() from the last upper it saw
my $count = $node->safe_psql('postgres',
	qq{SELECT count(*) FROM source_writes.updates(NULL::events, since => $upper)});
is($count, '0', 'nothing in the log since the last notified upper');
$node->safe_psql('postgres', 'DELETE FROM events WHERE id = 11');
@got = notifications();
$count = $node->safe_psql('postgres',
	qq{SELECT string_agg(diff || ':' || (data).id, ',') FROM source_writes.updates(NULL::events, since => $upper)});
is($count, '-1:11', 'the next batch is what changed since');
is($got[0][1], $node->safe_psql('postgres', q{SELECT upper FROM source_writes.frontiers('events')}),
	'and its notification carries the next upper');

$listener->quit;
done_testing();
