# Committed batches are announced on the source's channel with the new
# upper, so that a client can follow the log without polling.  The
# notifier sends them after the commits, coalesced: a listener learns of
# every new upper, or of a later one; never of an upper it cannot read
# yet, never of rolled-back edits.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SwTest;

my $node = SwTest::node('notify');
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE events (id int) SERVER k OPTIONS (topic 'events');
	CREATE FOREIGN TABLE other (id int) SERVER k OPTIONS (topic 'other');
});
my $channel = $node->safe_psql('postgres', q{SELECT source_writes.channel('events')});
my $other = $node->safe_psql('postgres', q{SELECT source_writes.channel('other')});
my $oid = $node->safe_psql('postgres', q{SELECT 'events'::regclass::oid});
is($channel, "source_writes_$oid", 'the channel is source_writes_<oid>');

my $listener = $node->background_psql('postgres');
$listener->query_safe(qq{LISTEN "$channel"});
$listener->query_safe(qq{LISTEN "$other"});

sub upper
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT upper FROM source_writes.frontiers('$table')");
}

# The notifications that reached the listener (psql prints them when it
# next talks to the server) until one on $until_channel carries
# $until_upper, as [channel, payload] pairs; dies after 30 s.
sub notifications_until
{
	my ($until_channel, $until_upper) = @_;
	my @got;
	my $deadline = time() + 30;
	while (time() < $deadline)
	{
		my $out = $listener->query_safe('SELECT 1');
		while ($out =~ /Asynchronous notification "([^"]+)" with payload "([^"]*)"/g)
		{
			push @got, [ $1, $2 ];
		}
		return @got if grep { $_->[0] eq $until_channel && $_->[1] eq $until_upper } @got;
		usleep(20_000);
	}
	die "no notification of upper $until_upper on $until_channel; got: "
	  . join(' ', map { "$_->[0]=$_->[1]" } @got);
}

sub on_channel
{
	my ($ch, @got) = @_;
	return map { $_->[1] } grep { $_->[0] eq $ch } @got;
}

$node->safe_psql('postgres', 'INSERT INTO events VALUES (1), (2)');
my $upper = upper('events');
my @got = notifications_until($channel, $upper);
is_deeply([ on_channel($channel, @got) ], [$upper],
	'one batch: one notification, with the new upper');

# a transaction over two sources announces both
$node->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO events VALUES (3);
	UPDATE events SET id = id + 10;
	INSERT INTO other VALUES (1);
	COMMIT;
});
$upper = upper('events');
my $other_upper = upper('other');
@got = notifications_until($channel, $upper);
push @got, notifications_until($other, $other_upper)
  unless grep { $_->[0] eq $other } @got;
is_deeply([ on_channel($channel, @got) ], [$upper], 'a batch of two sources: the first is told');
is_deeply([ on_channel($other, @got) ], [$other_upper], 'and so is the second');

# rolled back edits notify nothing: by the time the next batch of the
# other source is announced, nothing came for events
$node->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO events VALUES (4);
	ROLLBACK;
	DELETE FROM events WHERE false;
	INSERT INTO other VALUES (2);
});
$other_upper = upper('other');
@got = notifications_until($other, $other_upper);
is_deeply([ on_channel($channel, @got) ], [], 'nothing for rollbacks and empty statements');
is(upper('events'), $upper, 'whose upper did not move');

# the listener catches up with updates() from the last upper it was told
my $count = $node->safe_psql('postgres',
	qq{SELECT count(*) FROM source_writes.updates(NULL::events, since => $upper)});
is($count, '0', 'nothing in the log since the last notified upper');
$node->safe_psql('postgres', 'DELETE FROM events WHERE id = 11');
my $next = upper('events');
@got = notifications_until($channel, $next);
$count = $node->safe_psql('postgres',
	qq{SELECT string_agg(diff || ':' || (data).id, ',')
	   FROM source_writes.updates(NULL::events, since => $upper, until => $next)});
is($count, '-1:11', 'the next batch is what changed since');

# many writers at once: notifications are coalesced, each carries an upper
# that was readable when it was sent, they only go up, and the last one is
# the final upper
my @writers = map { $node->background_psql('postgres') } 1 .. 4;
$_->query_until(qr/started/, q{
	\echo started
	DO $$ BEGIN FOR i IN 1..200 LOOP INSERT INTO events VALUES (i); COMMIT; END LOOP; END $$;
}) for @writers;
$_->quit for @writers;
my $final = upper('events');
@got = notifications_until($channel, $final);
my @uppers = on_channel($channel, @got);
my @sorted = sort { $a <=> $b } @uppers;
is_deeply(\@uppers, \@sorted, 'concurrent commits: the announced uppers only go up');
cmp_ok(scalar(@uppers), '<=', 800, 'at most one notification per batch');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM source_writes.batches
	WHERE source = 'events'::regclass AND ts >= $upper AND ts < $final}), '801',
	'and the log up to the last one holds every batch');

$listener->quit;
done_testing();
