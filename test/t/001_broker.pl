# The embedded Kafka broker speaks the real protocol to real clients (kcat),
# creates topics on request, can be taken down and up, and stops cleanly.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => ['orders:4']);
my $bootstrap = $broker->{bootstrap};
like($bootstrap, qr/^127\.0\.0\.1:\d+$/, 'broker listens on loopback');

# metadata: one broker, the topic with its partitions
my ($stdout, $stderr);
($stdout, $stderr) = run_command(['kcat', '-L', '-b', $bootstrap, '-t', 'orders', '-m', '10']);
like($stdout, qr/1 brokers:/, 'metadata names one broker');
like($stdout, qr/topic "orders" with 4 partitions/, 'topic has 4 partitions');

# produce 100 keyed messages spread over the partitions, consume them back
my $input = join('', map { "k$_:{\"n\": $_}\n" } 1 .. 100);
my $in_file = PostgreSQL::Test::Utils::tempdir() . '/messages';
open(my $fh, '>', $in_file) or die;
print $fh $input;
close $fh;
($stdout, $stderr) = run_command(
	[ 'kcat', '-P', '-b', $bootstrap, '-t', 'orders', '-K', ':', '-l', $in_file ]);
is($stderr, '', 'produced without errors');

($stdout, $stderr) = run_command(
	[
		'kcat', '-C', '-b', $bootstrap, '-t', 'orders', '-o', 'beginning',
		'-e', '-q', '-f', '%p %k %s\n'
	]);
my @lines = split /\n/, $stdout;
is(scalar(@lines), 100, 'consumed 100 messages');
my %seen = map { (split / /, $_, 2)[1] => 1 } @lines;
is(scalar(keys %seen), 100, 'each message once');
ok($seen{'k42 {"n": 42}'}, 'keys and values arrive intact');
my %partitions = map { (split / /, $_)[0] => 1 } @lines;
ok(keys(%partitions) > 1, 'keys spread over partitions');

# control: create a topic with many partitions
is(SwTest::broker_control($broker, 'create-topic wide 16'), 'ok', 'create-topic answers ok');
($stdout, $stderr) = run_command(['kcat', '-L', '-b', $bootstrap, '-t', 'wide', '-m', '10']);
like($stdout, qr/topic "wide" with 16 partitions/, 'created topic has 16 partitions');
like(SwTest::broker_control($broker, 'create-topic bad 0'), qr/^error: /, 'bad partition count refused');
like(SwTest::broker_control($broker, 'frobnicate'), qr/^error: unknown command/, 'unknown command refused');

# control: a broker outage is visible to clients, and it ends
is(SwTest::broker_control($broker, 'broker-down 1'), 'ok', 'broker-down answers ok');
($stdout, $stderr) = run_command(
	[ 'timeout', '5', 'kcat', '-C', '-b', $bootstrap, '-t', 'orders', '-o', 'beginning', '-e', '-q' ]);
is($stdout, '', 'nothing consumed while the broker is down');
is(SwTest::broker_control($broker, 'broker-up 1'), 'ok', 'broker-up answers ok');
($stdout, $stderr) = run_command(
	[ 'timeout', '60', 'kcat', '-C', '-b', $bootstrap, '-t', 'orders', '-p', '0', '-o', 'beginning', '-e', '-q' ]);
ok(length($stdout) > 0, 'messages consumed again once the broker is up');

# SIGTERM stops it and removes its ready file
is(SwTest::stop_broker($broker), 0, 'broker exits 0 on SIGTERM');
ok(!-e $broker->{ready}, 'ready file removed');

done_testing();
