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
#   SwTest::produce($broker, 'topic', "key\t{...}");    # messages, a line each
#   SwTest::produce_bytes($broker, 'topic', $bytes, '-k', 'key', '-H', 'h=v');
#   my $registry = SwTest::registry();                 # our schema registry
#   ... user => 'u', password => 'p' | token => 't',   # with auth, and TLS
#       cert => $crt, key => $key, port => 4243, stall_ms => 500
#   SwTest::registry_control($registry, 'stall', ms => 200);
#   my $stats = SwTest::registry_stats($registry);    # {schema_ids => N, ...}
#   my ($status, $body) = SwTest::registry_http($registry, 'GET', '/subjects');
#   my $id = SwTest::registry_register($registry, 'subject', $schema_json);
#   my $ids = SwTest::produce_avro($broker, $registry, 'topic',
#       schema => $json, records => ['{"a": 1}'], ...); # {value_schema_id}
#   SwTest::run_client('pg_dump', 'pg_dump', '-f', $file, $connstr);
#   my $from = -s $node->logfile; kill 'KILL', $pid;
#   SwTest::wait_for_restart($node, $from);       # after a backend's crash
#
# The broker is the embedded one (test/kafka_broker), started once per
# test file that asks for it and stopped when the file ends; so is the
# schema registry (test/schema_registry).  Avro messages are made by
# test/avro_producer.
package SwTest;

use strict;
use warnings;

use File::Spec;
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

my @brokers;
my @registries;

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

# Produce one message of any bytes, with kcat's options for its key and
# headers (-k key, -H name=value); those are arguments, which end at a NUL
# byte.
sub produce_bytes
{
	my ($broker, $topic, $value, @options) = @_;
	$produce_dir //= PostgreSQL::Test::Utils::tempdir();
	my $file = "$produce_dir/value";
	open(my $fh, '>:raw', $file) or die "cannot write $file: $!";
	print $fh $value;
	close $fh;
	my ($out, $err) = PostgreSQL::Test::Utils::run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', $topic, @options, $file ]);
	die "kcat: $err" if $err ne '';
}

# POST a body to a webhook URL with curl, with the headers given ("Name:
# value"); returns "status answer", the answer's newlines removed.
sub post
{
	my ($url, $body, @headers) = @_;
	my ($out) = PostgreSQL::Test::Utils::run_command(
		[ 'curl', '-s', '-X', 'POST', '-o', '-', '-w', ' %{http_code}',
		  $url, '--data-binary', $body, map { ('-H', $_) } @headers ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
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

# Start a schema registry (test/schema_registry); returns a hash with url,
# port, pid, log, and cacert (the certificate, with cert and key).
# Options: user and password (basic auth) or token (bearer), cert and key
# (PEM files: HTTPS), port, stall_ms (how long stall holds an answer by
# default).  It keeps its schemas in memory: one started again at the same
# port (registry(port => $old->{port})) gives the same ids to the same
# schemas registered in the same order.
sub registry
{
	my (%opts) = @_;
	my $bin = $ENV{SW_REGISTRY_BIN}
	  || File::Spec->rel2abs('test/schema_registry');
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $ready = "$dir/registry.ready";
	my @cmd = ($bin, '--ready-file', $ready);

	push @cmd, '--user', $opts{user}, '--password', $opts{password}
	  if defined $opts{user};
	push @cmd, '--token', $opts{token} if defined $opts{token};
	push @cmd, '--cert', $opts{cert}, '--key', $opts{key} if $opts{cert};
	push @cmd, '--port', $opts{port} if $opts{port};
	push @cmd, '--stall-ms', $opts{stall_ms} if $opts{stall_ms};

	my $pid = fork();
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDOUT, '>', "$dir/registry.log");
		open(STDERR, '>&', \*STDOUT);
		exec(@cmd) or die "could not run $bin: $!";
	}
	for (1 .. 100)
	{
		last if -s $ready;
		usleep(100_000);
	}
	die "the schema registry did not start" unless -s $ready;

	my %info = (pid => $pid, log => "$dir/registry.log", ready => $ready);
	$info{cacert} = $opts{cert} if $opts{cert};
	open(my $fh, '<', $ready) or die "cannot read $ready: $!";
	while (<$fh>)
	{
		chomp;
		my ($k, $v) = split /=/, $_, 2;
		$info{$k} = $v;
	}
	close $fh;
	($info{port}) = $info{url} =~ /:(\d+)$/;
	push @registries, \%info;
	return \%info;
}

# One HTTP request to a registry with curl; returns (status, body), status
# "000" when no answer came.  Options: body, content_type (default the
# registry's own), user and password, token, timeout (seconds, default 60).
sub registry_http
{
	my ($registry, $method, $path, %opts) = @_;
	my @cmd = ('curl', '-s', '-o', '-', '-w', '\n%{http_code}', '-X', $method,
		'--max-time', $opts{timeout} || 60);

	push @cmd, '--cacert', $registry->{cacert} if $registry->{cacert};
	push @cmd, '-u', "$opts{user}:$opts{password}" if defined $opts{user};
	push @cmd, '-H', "Authorization: Bearer $opts{token}"
	  if defined $opts{token};
	if (defined $opts{body})
	{
		push @cmd, '-H', 'Content-Type: '
		  . ($opts{content_type} || 'application/vnd.schemaregistry.v1+json');
		push @cmd, '--data-binary', $opts{body};
	}
	my ($out, $err) = ('', '');
	IPC::Run::run([ @cmd, $registry->{url} . $path ], '>', \$out, '2>', \$err);
	my ($body, $status) = $out =~ /^(.*)\n(\d{3})$/s
	  or die "curl gave no status: $out $err";
	return ($status, $body);
}

# Register a schema (JSON text) under a subject; returns its id.  Options
# as registry_http's (user and password, token).
sub registry_register
{
	my ($registry, $subject, $schema, %opts) = @_;
	my ($status, $body) = registry_http($registry, 'POST', "/subjects/$subject/versions",
		%opts, body => encode_json({ schema => $schema }));
	die "registry register $subject: $status $body" unless $status eq '200';
	return decode_json($body)->{id};
}

# Switch a registry's fault mode: ok, fail, notfound, unauthorized, stall
# (ms => N), garbage, huge (mb => N), down; or reset its counters (reset).
sub registry_control
{
	my ($registry, $mode, %args) = @_;
	my $query = join('&', map { "$_=$args{$_}" } sort keys %args);
	my ($status, $body) = registry_http($registry, 'POST',
		"/_control/$mode" . ($query ne '' ? "?$query" : ''), body => '');
	die "registry control $mode: $status $body" unless $status eq '200';
	return decode_json($body);
}

# A registry's counters of the requests it had, as a hash: requests,
# schema_ids (GET /schemas/ids/...), register, lookup, subjects, versions,
# other, paths ({"GET /schemas/ids/1" => N, ...}), mode, and schemas (how
# many it keeps).
sub registry_stats
{
	my ($registry) = @_;
	my ($status, $body) = registry_http($registry, 'GET', '/_control/stats');
	die "registry stats: $status $body" unless $status eq '200';
	return decode_json($body);
}

# Stop a registry with SIGTERM and wait for it; returns its exit status.
sub stop_registry
{
	my ($registry) = @_;
	return undef unless $registry->{pid};
	kill 'TERM', $registry->{pid};
	waitpid($registry->{pid}, 0);
	my $status = $?;
	$registry->{pid} = undef;
	return $status;
}

# Produce Avro messages in the Confluent wire format with test/avro_producer.
# records => [lines]: each a record in Avro's JSON encoding, or
# "KEY\tVALUE" with key_schema or raw_key; an empty VALUE is a tombstone.
# schema (JSON text; registered as TOPIC-value, or subject), key_schema
# (TOPIC-key, or key_subject), schema_id and key_schema_id (frame with
# these ids, not registering), raw_key (keys as they are), raw_hex (values
# in hex, sent as they are), partition, user and password, token.  The
# registry may be undef with schema_id or raw_hex.  Dies unless every
# message was delivered; returns {value_schema_id, key_schema_id, produced}.
my $avro_dir;

sub produce_avro
{
	my ($broker, $registry, $topic, %opts) = @_;
	my $bin = $ENV{SW_AVRO_PRODUCER_BIN}
	  || File::Spec->rel2abs('test/avro_producer');
	my @cmd = ($bin, '--brokers', $broker->{bootstrap}, '--topic', $topic);

	$avro_dir //= PostgreSQL::Test::Utils::tempdir();
	for my $which ('schema', 'key_schema')
	{
		next unless defined $opts{$which};
		my $file = "$avro_dir/$which.avsc";
		open(my $fh, '>', $file) or die "cannot write $file: $!";
		print $fh $opts{$which};
		close $fh;
		(my $option = "--$which") =~ s/_/-/g;
		push @cmd, $option, $file;
	}
	if ($registry)
	{
		push @cmd, '--registry', $registry->{url};
		push @cmd, '--cacert', $registry->{cacert} if $registry->{cacert};
	}
	push @cmd, '--user', $opts{user}, '--password', $opts{password}
	  if defined $opts{user};
	push @cmd, '--token', $opts{token} if defined $opts{token};
	for my $opt ('subject', 'key_subject', 'schema_id', 'key_schema_id', 'partition')
	{
		(my $option = "--$opt") =~ s/_/-/g;
		push @cmd, $option, $opts{$opt} if defined $opts{$opt};
	}
	push @cmd, '--raw-key' if $opts{raw_key};
	push @cmd, '--raw-hex' if $opts{raw_hex};

	my $input = join('', map { "$_\n" } @{ $opts{records} || [] });
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \$input, '>', \$out, '2>', \$err)
	  or die "avro_producer failed: $err";
	my %result = map { split /=/, $_, 2 } split /\n/, $out;
	return \%result;
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
	# waitpid sets $?, the exit status of the test
	local $?;

	stop_broker($_) for @brokers;
	stop_registry($_) for @registries;
}

1;
