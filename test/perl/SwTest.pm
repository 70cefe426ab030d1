# SwTest: helpers shared by the TAP tests of source_writes.
#
#   my $node = SwTest::node('main');                   # preloaded, started
#   my $node = SwTest::node('plain', preload => 0);    # without the workers
#   my $node = SwTest::node('new', start => 0);        # initdb only
#   my $broker = SwTest::broker(topics => ['t:4']);    # our own broker
#   my $txns = SwTest::broker(txn_topic => 't',        # a fixed log with
#       txn_partitions => ['t1:a commit1 t2:b abort2']);  # transactions
#   ... txn_topic => 't', port => 4242, cluster_id => 'c'  # at a fixed port,
#                                                      # of a named cluster
#   SwTest::broker_control($broker, 'broker-down 1');
#   SwTest::run_client('pg_dump', 'pg_dump', '-f', $file, $connstr);
#   my $from = -s $node->logfile; kill 'KILL', $pid;
#   SwTest::wait_for_restart($node, $from);       # after a backend's crash
#
# The broker is the embedded one (test/kafka_broker), started once per
# test file that asks for it and stopped when the file ends.
package SwTest;

use strict;
use warnings;

use File::Spec;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

my @brokers;

# A new cluster with the extension created in database postgres.  With
# start => 0 it is only initialised (and has no extension).
sub node
{
	my ($name, %opts) = @_;
	my $preload = exists $opts{preload} ? $opts{preload} : 1;
	my $start = exists $opts{start} ? $opts{start} : 1;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'source_writes'\n")
	  if $preload;
	$node->append_conf('postgresql.conf', $opts{conf}) if $opts{conf};
	return $node unless $start;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION source_writes')
	  unless $opts{no_extension};
	return $node;
}

# Start an embedded Kafka broker; returns a hash with bootstrap, control
# and pid.  topics => ['name:partitions', ...] creates topics first.
sub broker
{
	my (%opts) = @_;
	my $bin = $ENV{SW_BROKER_BIN}
	  || File::Spec->rel2abs('test/kafka_broker');
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $ready = "$dir/broker.ready";
	my @cmd = ($bin, '--ready-file', $ready);

	push @cmd, '--brokers', $opts{brokers} if $opts{brokers};
	push @cmd, map { ('--topic', $_) } @{ $opts{topics} || [] };
	push @cmd, '--txn-topic', $opts{txn_topic} if $opts{txn_topic};
	push @cmd, map { ('--txn-partition', $_) } @{ $opts{txn_partitions} || [] };
	push @cmd, '--port', $opts{port} if $opts{port};
	push @cmd, '--cluster-id', $opts{cluster_id} if $opts{cluster_id};

	my $pid = fork();
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDOUT, '>', "$dir/broker.log");
		open(STDERR, '>&', \*STDOUT);
		exec(@cmd) or die "could not run $bin: $!";
	}
	for (1 .. 100)
	{
		last if -s $ready;
		usleep(100_000);
	}
	die "the Kafka broker did not start" unless -s $ready;

	my %info = (pid => $pid, log => "$dir/broker.log", ready => $ready);
	open(my $fh, '<', $ready) or die "cannot read $ready: $!";
	while (<$fh>)
	{
		chomp;
		my ($k, $v) = split /=/, $_, 2;
		$info{$k} = $v;
	}
	close $fh;
	push @brokers, \%info;
	return \%info;
}

# Send one control command to a broker; returns its answer line.
sub broker_control
{
	my ($broker, $command) = @_;
	my ($host, $port) = split /:/, $broker->{control};
	my $sock = IO::Socket::INET->new(
		PeerAddr => $host,
		PeerPort => $port,
		Proto => 'tcp',
		Timeout => 10) or die "cannot reach broker control: $!";
	print $sock "$command\n";
	my $answer = <$sock>;
	close $sock;
	chomp $answer if defined $answer;
	return $answer;
}

# Produce messages to a topic of a broker with kcat, one a line, each
# "key<TAB>value"; an empty key or value is none.
my $produce_dir;

sub produce
{
	my ($broker, $topic, @lines) = @_;
	$produce_dir //= PostgreSQL::Test::Utils::tempdir();
	my $file = "$produce_dir/messages";
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	print $fh map { "$_\n" } @lines;
	close $fh;
	my ($out, $err) = PostgreSQL::Test::Utils::run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', $topic, '-K', "\t", '-Z', '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

# Stop a broker with SIGTERM and wait for it; returns its exit status.
sub stop_broker
{
	my ($broker) = @_;
	return undef unless $broker->{pid};
	kill 'TERM', $broker->{pid};
	waitpid($broker->{pid}, 0);
	my $status = $?;
	$broker->{pid} = undef;
	return $status;
}

# Run a client program (pg_dump, pg_restore, psql); it must succeed and
# say no ERROR, WARNING or FATAL: two checks, named after $name.
sub run_client
{
	my ($name, @cmd) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr);
	Test::More::ok($ok, "$name succeeds") or Test::More::diag("stderr: $stderr");
	Test::More::unlike($stderr, qr/ERROR|WARNING|FATAL/,
		"$name reports no errors or warnings");
	Test::More::note("stderr of $name: $stderr") if $stderr ne '';
}

# Wait for the postmaster to restart everything after a backend died
# (kill -9) and to accept connections again.  $from is the size of the
# log before the kill: a connection that merely came before the
# postmaster noticed the death would not prove the restart.
sub wait_for_restart
{
	my ($node, $from) = @_;

	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $from)
	  or die 'the postmaster did not restart the server';
	$node->poll_query_until('postgres', 'SELECT true')
	  or die 'the server did not come back';
}

END
{
	stop_broker($_) for @brokers;
}

1;
