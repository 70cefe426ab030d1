# Options of servers and user mappings cannot make a backend load a library,
# run a program or read a file of the server: the validator calls nothing
# in librdkafka, refuses plugin, engine and kinit properties to everyone,
# and lets only a superuser name files.  Errors never show the values of
# user mappings or of credentials, and neither does the server log.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

# PostgreSQL::Test::Cluster logs every statement as typed, secrets and all;
# that is the server's statement logging, not ours.  Turn it off and keep
# the default log_min_error_statement, so the log shows what source_writes
# reports about failing statements.
my $node = SwTest::node('optsec',
	conf => "log_statement = none\nlog_min_error_statement = error\n");

my $dir = PostgreSQL::Test::Utils::tempdir();
my $marker = "$dir/loaded";
my $kinit_marker = "$dir/kinit-ran";
my $lib = "$dir/evil.so";

# a library whose constructor leaves a marker file wherever it is loaded
open(my $fh, '>', "$dir/evil.c") or die "cannot write $dir/evil.c: $!";
print $fh <<"EOC";
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void
leave_marker(void)
{
	FILE	   *f = fopen("$marker", "a");

	if (f)
	{
		fprintf(f, "loaded in pid %d as uid %d\\n", (int) getpid(), (int) getuid());
		fclose(f);
	}
}
EOC
close $fh;
system_or_bail('gcc', '-shared', '-fPIC', '-o', $lib, "$dir/evil.c");

# the library works, and the server can read it: LOAD (superuser) runs the
# constructor before it complains about the missing magic block
my ($ret, $stdout, $stderr) = $node->psql('postgres', "LOAD '$lib'");
like($stderr, qr/incompatible library/, 'LOAD of the test library fails late');
ok(-e $marker, 'the test library leaves its marker when the server loads it');
unlink $marker or die "cannot remove $marker: $!";

$node->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	GRANT USAGE ON FOREIGN SERVER k, hooks TO alice;
	GRANT USAGE ON FOREIGN DATA WRAPPER source_writes TO alice;
});
# alice owns a server and has a mapping of her own to change
$node->safe_psql('postgres', q{
	CREATE SERVER alices FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE USER MAPPING FOR alice SERVER k OPTIONS ("rdkafka.sasl.username" 'alice');
}, extra_params => [ '-U', 'alice' ]);

# psql as a role, or as the bootstrap superuser if undef; returns (exit
# code, stderr)
sub run_as
{
	my ($role, $sql) = @_;
	my ($r, $out, $err) = $node->psql('postgres', $sql,
		extra_params => defined $role ? [ '-U', $role ] : []);
	return ($r, $err);
}

# every way in for one option, as alice (USAGE on k and on the wrapper) and
# as mallory (no privileges at all, direct calls of the validator)
sub attempts
{
	my ($name, $value) = @_;
	return (
		[ 'mallory', 'validator, server',
			qq{SELECT source_writes.fdw_validator(ARRAY['type=kafka', 'brokers=localhost:1', '$name=$value'], 'pg_foreign_server'::regclass)} ],
		[ 'mallory', 'validator, user mapping',
			qq{SELECT source_writes.fdw_validator(ARRAY['$name=$value'], 'pg_user_mapping'::regclass)} ],
		[ 'alice', 'CREATE SERVER',
			qq{CREATE SERVER a2 FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers 'localhost:9092', "$name" '$value')} ],
		[ 'alice', 'ALTER SERVER',
			qq{ALTER SERVER alices OPTIONS (ADD "$name" '$value')} ],
		[ 'alice', 'CREATE USER MAPPING',
			qq{CREATE USER MAPPING FOR alice SERVER alices OPTIONS ("$name" '$value')} ],
		[ 'alice', 'ALTER USER MAPPING',
			qq{ALTER USER MAPPING FOR alice SERVER k OPTIONS (ADD "$name" '$value')} ]);
}

my @refused = (
	[ 'rdkafka.plugin.library.paths', $lib ],
	[ 'rdkafka.ssl.engine.location', $lib ],
	[ 'rdkafka.sasl.kerberos.kinit.cmd', "touch $kinit_marker" ]);
my @files = (
	[ 'rdkafka.ssl.key.location', '/etc/passwd' ],
	[ 'rdkafka.ssl.ca.location', '/etc/passwd' ],
	[ 'rdkafka.ssl.keystore.location', $lib ],
	[ 'rdkafka.sasl.kerberos.keytab', "$dir/krb5.keytab" ]);

# non-superusers: everything is refused
foreach my $opt (@refused, @files)
{
	my ($name, $value) = @$opt;
	my $expected = (grep { $_->[0] eq $name } @refused)
	  ? qr/ERROR:  librdkafka property "[^"]+" is not allowed/
	  : qr/ERROR:  option "\Q$name\E" may only be set by a superuser/;

	foreach my $try (attempts($name, $value))
	{
		my ($role, $how, $sql) = @$try;
		($ret, $stderr) = run_as($role, $sql);
		isnt($ret, 0, "$name: $how as $role fails");
		like($stderr, $expected, "$name: $how as $role is refused");
	}
}
ok(!-e $marker, 'no backend loaded the library');
ok(!-e $kinit_marker, 'no backend ran the kinit command');

# a superuser may name files, but not load code or run programs either
$node->safe_psql('postgres', qq{
	CREATE SERVER tls FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9093',
	           "rdkafka.ssl.ca.location" '/etc/passwd',
	           "rdkafka.ssl.certificate.location" '/etc/passwd');
	ALTER SERVER tls OPTIONS (ADD "rdkafka.ssl.crl.location" '/etc/passwd');
	CREATE USER MAPPING FOR alice SERVER tls
	  OPTIONS ("rdkafka.ssl.key.location" '/etc/passwd',
	           "rdkafka.sasl.kerberos.keytab" '$dir/krb5.keytab');
	ALTER USER MAPPING FOR alice SERVER tls
	  OPTIONS (ADD "rdkafka.ssl.keystore.location" '/etc/passwd');
	SELECT source_writes.fdw_validator(ARRAY['rdkafka.ssl.key.location=/etc/passwd'],
	                                   'pg_user_mapping'::regclass);
});
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_foreign_server, unnest(srvoptions) o
		WHERE srvname = 'tls' AND o LIKE 'rdkafka.%.location=%'}),
	'3', 'a superuser sets file options on a server');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_user_mappings, unnest(umoptions) o
		WHERE srvname = 'tls' AND usename = 'alice'}),
	'3', 'a superuser sets file options on a user mapping');

foreach my $opt (@refused)
{
	my ($name, $value) = @$opt;

	foreach my $try (attempts($name, $value))
	{
		my (undef, $how, $sql) = @$try;
		($ret, $stderr) = run_as(undef, $sql);
		isnt($ret, 0, "$name: $how as superuser fails");
		like($stderr, qr/ERROR:  librdkafka property "[^"]+" is not allowed/,
			"$name: $how as superuser is refused");
	}
}
ok(!-e $marker, 'no backend loaded the library, superuser or not');
ok(!-e $kinit_marker, 'no backend ran the kinit command, superuser or not');

# alice may use the server but not change what the superuser set up for
# her; she may drop the file options, which leaves nothing to abuse
$node->safe_psql('postgres', 'GRANT USAGE ON FOREIGN SERVER tls TO alice');
($ret, $stderr) = run_as('alice',
	q{ALTER USER MAPPING FOR alice SERVER tls OPTIONS (ADD "rdkafka.sasl.username" 'alice')});
like($stderr, qr/ERROR:  option "rdkafka\.[a-z.]+" may only be set by a superuser/,
	'a non-superuser cannot modify a user mapping that names files');
($ret, $stderr) = run_as('alice', q{
	ALTER USER MAPPING FOR alice SERVER tls
	  OPTIONS (DROP "rdkafka.ssl.key.location", DROP "rdkafka.sasl.kerberos.keytab",
	           DROP "rdkafka.ssl.keystore.location", ADD "rdkafka.sasl.username" 'alice')});
is($ret, 0, 'a non-superuser can drop file options from her user mapping');

# nothing an attempt tried is stored anywhere
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM (
		  SELECT srvname AS obj, o FROM pg_foreign_server, unnest(srvoptions) o
		  UNION ALL
		  SELECT srvname || ' for ' || usename, o
		  FROM pg_user_mappings, unnest(umoptions) o) opts
		WHERE o ~ '^rdkafka\.(plugin|ssl\.engine|sasl\.kerberos\.kinit)'
		   OR (o ~ '(\.location|keytab)=' AND obj <> 'tls')}),
	'0', 'no refused option was stored, and no file option but the superuser\'s');

# secrets: the values of user mappings and of credentials never appear in
# errors or in the log
my @secrets;
sub secret
{
	push @secrets, 'sw-secret-' . scalar(@secrets) . '-Zq7x';
	return $secrets[-1];
}

my @leaks = (
	[ 'alice', 'a user mapping with a bad value beside a password',
		sprintf(q{CREATE USER MAPPING FOR alice SERVER alices OPTIONS ("rdkafka.sasl.password" '%s', "rdkafka.security.protocol" '%s')},
			secret(), secret()),
		qr/invalid value for option "rdkafka\.security\.protocol"/ ],
	[ 'alice', 'a bad integer in a user mapping',
		sprintf(q{ALTER USER MAPPING FOR alice SERVER k OPTIONS (ADD "rdkafka.fetch.wait.max.ms" '%s')},
			secret()),
		qr/invalid value for option "rdkafka\.fetch\.wait\.max\.ms"/ ],
	[ 'alice', 'a webhook secret in a Kafka user mapping',
		sprintf(q{CREATE USER MAPPING FOR alice SERVER alices OPTIONS (secret '%s')}, secret()),
		qr/option "secret" is not valid for Kafka user mappings/ ],
	[ 'alice', 'a webhook secret beside a Kafka property',
		sprintf(q{CREATE USER MAPPING FOR alice SERVER hooks OPTIONS (secret '%s', "rdkafka.sasl.password" '%s')},
			secret(), secret()),
		qr/option "rdkafka\.sasl\.password" is not valid for webhook user mappings/ ],
	[ 'alice', 'a password on a server',
		sprintf(q{ALTER SERVER alices OPTIONS (ADD "rdkafka.sasl.password" '%s')}, secret()),
		qr/holds a credential and is not allowed in server options/ ],
	[ 'alice', 'an unknown credential in a user mapping',
		sprintf(q{CREATE USER MAPPING FOR alice SERVER alices OPTIONS ("rdkafka.sasl.oauthbearer.client.secret" '%s')},
			secret()),
		qr/invalid option "rdkafka\.sasl\.oauthbearer\.client\.secret"/ ],
	[ 'mallory', 'a direct call with a key password and a bad value',
		sprintf(q{SELECT source_writes.fdw_validator(ARRAY['rdkafka.ssl.key.password=%s', 'rdkafka.check.crcs=%s'], 'pg_user_mapping'::regclass)},
			secret(), secret()),
		qr/invalid value for option "rdkafka\.check\.crcs"/ ]);

foreach my $leak (@leaks)
{
	my ($role, $what, $sql, $expected) = @$leak;

	($ret, $stderr) = run_as($role, $sql);
	like($stderr, $expected, "$what: refused");
	unlike($stderr, qr/sw-secret-/, "$what: the error shows no value");
}

my $log = slurp_file($node->logfile);
foreach my $leak (@leaks)
{
	my ($role, $what, $sql, $expected) = @$leak;

	like($log, $expected, "$what: the error is in the log");
}
foreach my $secret (@secrets)
{
	unlike($log, qr/\Q$secret\E/, "$secret is not in the log");
}

done_testing();
