# The webhook server with TLS: source_writes.webhook_ssl_cert_file and
# webhook_ssl_key_file (relative to the data directory) make it serve HTTPS
# only, with a self-signed certificate made here.  The settings are
# superuser-only; the key is checked as PostgreSQL checks ssl_key_file; a
# reload that changes them, or webhook_listen, restarts the listener without
# restarting PostgreSQL, and one with settings that cannot be used keeps
# the previous configuration.  Nothing of the key reaches the log.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Errno qw(ECONNREFUSED);
use File::Copy qw(copy);
use IO::Socket::INET;
use IPC::Run;
use SwTest;

# two self-signed certificates for 127.0.0.1, each with its key
my $dir = PostgreSQL::Test::Utils::tempdir();
for my $name ('a', 'b')
{
	system_or_bail('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
		'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj',
		"/CN=source_writes test $name", '-addext', 'subjectAltName=IP:127.0.0.1',
		'-keyout', "$dir/$name.key", '-out', "$dir/$name.crt");
	chmod 0600, "$dir/$name.key";
}

# and a chain: a root, an intermediate, and a certificate it signed
sub write_file
{
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "$path: $!";
	print $fh $text;
	close $fh;
}
write_file("$dir/ca.ext", "basicConstraints = critical, CA:TRUE\nkeyUsage = keyCertSign, cRLSign\n");
write_file("$dir/leaf.ext", "subjectAltName = IP:127.0.0.1\n");
system_or_bail('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
	'-nodes', '-days', '2', '-subj', '/CN=source_writes test root', '-keyout', "$dir/root.key",
	'-out', "$dir/root.crt");
for my $cert ([ 'mid', 'root', 'ca.ext' ], [ 'leaf', 'mid', 'leaf.ext' ])
{
	my ($name, $signer, $ext) = @$cert;
	system_or_bail('openssl', 'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-nodes', '-subj', "/CN=source_writes test $name", '-keyout', "$dir/$name.key",
		'-out', "$dir/$name.csr");
	system_or_bail('openssl', 'x509', '-req', '-in', "$dir/$name.csr", '-days', '2',
		'-CA', "$dir/$signer.crt", '-CAkey', "$dir/$signer.key", '-CAcreateserial',
		'-extfile', "$dir/$ext", '-out', "$dir/$name.crt");
	chmod 0600, "$dir/$name.key";
}
write_file("$dir/chain.crt", slurp_file("$dir/leaf.crt") . slurp_file("$dir/mid.crt"));

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('tls', start => 0,
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	  . "source_writes.webhook_ssl_cert_file = 'webhook.crt'\n"
	  . "source_writes.webhook_ssl_key_file = 'webhook.key'\n");
my $data = $node->data_dir;
copy("$dir/a.crt", "$data/webhook.crt") or die "copy: $!";
copy("$dir/a.key", "$data/webhook.key") or die "copy: $!";
chmod 0600, "$data/webhook.key";
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST a JSON body with curl: "status text", "000" when no HTTP answer came
sub post
{
	my ($url, $body, @opts) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', @opts,
		'-H', 'Content-Type: application/json', '--data-binary', $body, $url ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return defined $status ? ($text eq '' ? $status : "$status $text") : "no answer: $out";
}

sub https { my ($p, $crt, $id) = @_; return post("https://127.0.0.1:$p/postgres/public/hits", qq({"id": "$id"}), '--cacert', $crt); }
sub http { my ($p, $id) = @_; return post("http://127.0.0.1:$p/postgres/public/hits", qq({"id": "$id"})); }

# change settings with ALTER SYSTEM, reload, and wait for what the worker logs
sub reload
{
	my ($settings, $expect, $name) = @_;
	my $from = -s $node->logfile;
	sql($settings) if $settings;
	sql('SELECT pg_reload_conf()');
	ok($node->wait_for_log($expect, $from), $name);
	return $from;
}

sub webhook_pid
{
	return sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
}

sub postmaster_pid
{
	open(my $fh, '<', "$data/postmaster.pid") or die "postmaster.pid: $!";
	my $pid = <$fh>;
	chomp $pid;
	return $pid;
}

sql(q{CREATE EXTENSION source_writes;
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE hits (id text) SERVER hooks OPTIONS (format 'json')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port \(HTTPS\)/),
	'the server starts with HTTPS, from files named relative to the data directory');

# HTTPS only
is(https($port, "$dir/a.crt", 'h1'), '200 1 row', 'a POST over HTTPS, checked against the certificate: 200');
is(sql(q{SELECT string_agg(id, ',') FROM hits}), 'h1', 'and the row is there');
is(post("https://127.0.0.1:$port/postgres/public/hits", '{"id": "x1"}'), '000',
	'a client that does not trust the certificate gets no answer');
is(http($port, 'x2'), '000', 'plain HTTP to the HTTPS port: no answer');
is(sql(q{SELECT string_agg(id, ',') FROM hits}), 'h1', 'and nothing written');

# TLS 1.2 or later, as PostgreSQL by default (the client allows 1.1, so a
# refusal is the server's)
sub handshake
{
	my ($version) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'openssl', 's_client', '-connect', "127.0.0.1:$port", "-$version",
		'-cipher', 'DEFAULT@SECLEVEL=0', '-CAfile', "$dir/a.crt" ],
		'<', \'', '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	return "$out\n$err";
}
like(handshake('tls1_2'), qr/^New, TLSv1\.2/m, 'TLS 1.2 is taken');
unlike(handshake('tls1_1'), qr/^New, TLSv1/m, 'TLS 1.1 is refused');

# the settings are the superuser's: postgresql.conf or ALTER SYSTEM only
sql(q{CREATE ROLE alice LOGIN});
for my $try (
	[ q{SET source_writes.webhook_ssl_key_file = '/tmp/k'}, qr/cannot be changed now/ ],
	[ q{SET source_writes.webhook_ssl_cert_file = '/tmp/c'}, qr/cannot be changed now/ ],
	[ q{ALTER ROLE alice SET source_writes.webhook_ssl_key_file = '/tmp/k'}, qr/cannot be changed now/ ],
	[ q{ALTER ROLE alice SET source_writes.webhook_ssl_cert_file = '/tmp/c'}, qr/cannot be changed now/ ],
	[ q{ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '/tmp/k'}, qr/permission denied to set parameter/ ],
	[ q{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '/tmp/c'}, qr/permission denied to set parameter/ ])
{
	my ($stdout, $stderr);
	my $rc = $node->psql('postgres', $try->[0], extra_params => [ '-U', 'alice' ],
		stdout => \$stdout, stderr => \$stderr);
	isnt($rc, 0, "a role without superuser: $try->[0] fails");
	like($stderr, $try->[1], '... saying why');
}
is(sql(q{SELECT count(*) FROM pg_db_role_setting WHERE setconfig::text LIKE '%webhook_ssl%'}), '0',
	'no role or database setting was stored');

my $worker = webhook_pid();
my $postmaster = postmaster_pid();

# a key file that its group or others can read: refused, the server keeps
# its configuration
copy("$dir/b.key", "$dir/b-open.key") or die "copy: $!";
chmod 0640, "$dir/b-open.key";
my $from = reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '$dir/b.crt';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '$dir/b-open.key'},
	qr/configuration was not reloaded/, 'a reload with a group-readable key file');
my $log = slurp_file($node->logfile, $from);
like($log, qr/LOG:  webhook server private key file "\Q$dir\E\/b-open\.key" has group or world access\n.*DETAIL:  File must have permissions u=rw \(0600\) or less if owned by the database user, or permissions u=rw,g=r \(0640\) or less if owned by root\./,
	'is refused, with the reason in the log');
like($log, qr/DETAIL:  The server keeps serving HTTPS on 127\.0\.0\.1:$port\./, 'which says what is kept');
is(https($port, "$dir/a.crt", 'h2'), '200 1 row', 'the server still serves the previous certificate');

# only one of the two
$from = reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_key_file = ''},
	qr/configuration was not reloaded/, 'a reload with the certificate and no key');
like(slurp_file($node->logfile, $from),
	qr/LOG:  source_writes\.webhook_ssl_cert_file and source_writes\.webhook_ssl_key_file must be set together\n.*DETAIL:  Only source_writes\.webhook_ssl_cert_file is set\./,
	'is refused, saying so');
is(https($port, "$dir/a.crt", 'h3'), '200 1 row', 'the previous configuration still serves');

# not a certificate
$from = reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '$dir/a.key';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '$dir/a.key'},
	qr/configuration was not reloaded/, 'a reload with a key file for the certificate');
like(slurp_file($node->logfile, $from),
	qr/LOG:  webhook server certificate file "\Q$dir\E\/a\.key" holds no certificate in PEM format/,
	'is refused, saying so');

# a certificate and a key that do not match: GnuTLS refuses them, and the
# server starts again as it was
$from = reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '$dir/b.crt';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '$dir/a.key'},
	qr/configuration was not reloaded.*?listening on 127\.0\.0\.1:$port \(HTTPS\)/s,
	'a reload with a key that is not the certificate\'s');
like(slurp_file($node->logfile, $from),
	qr/webhook server cannot start\n.*DETAIL:  could not serve on 127\.0\.0\.1:$port: .*do not match/,
	'is refused, with what GnuTLS says');
is(https($port, "$dir/a.crt", 'h4'), '200 1 row', 'and the previous configuration serves again');

# another certificate and key: the server restarts with them
reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '$dir/b.crt';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '$dir/b.key'},
	qr/restarts on 127\.0\.0\.1:$port\n.*?DETAIL:  Its TLS settings or files changed.*?listening on 127\.0\.0\.1:$port \(HTTPS\)/s,
	'a reload with another certificate and key restarts the listener');
is(https($port, "$dir/b.crt", 'h5'), '200 1 row', 'which serves the new certificate');
is(https($port, "$dir/a.crt", 'x3'), '000', 'and not the old one');
reload(qq{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '$dir/chain.crt';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = '$dir/leaf.key'},
	qr/restarts on 127\.0\.0\.1:$port\n.*?DETAIL:  Its TLS settings or files changed.*?listening on 127\.0\.0\.1:$port \(HTTPS\)/s,
	'a certificate followed by its intermediate');
is(https($port, "$dir/root.crt", 'h5b'), '200 1 row', 'serves the chain to a client that trusts only the root');

# TLS off, and on again
reload(q{ALTER SYSTEM SET source_writes.webhook_ssl_cert_file = '';
	ALTER SYSTEM SET source_writes.webhook_ssl_key_file = ''},
	qr/listening on 127\.0\.0\.1:$port\n/, 'a reload that empties both settings');
is(http($port, 'h6'), '200 1 row', 'turns HTTPS off: plain HTTP is served');
is(https($port, "$dir/b.crt", 'x4'), '000', 'and HTTPS not');
reload(q{ALTER SYSTEM RESET source_writes.webhook_ssl_cert_file;
	ALTER SYSTEM RESET source_writes.webhook_ssl_key_file},
	qr/listening on 127\.0\.0\.1:$port \(HTTPS\)/, 'a reload back to postgresql.conf\'s settings');
is(https($port, "$dir/a.crt", 'h7'), '200 1 row', 'turns HTTPS on again');
is(http($port, 'x5'), '000', 'and plain HTTP off');

# a reload that changes webhook_listen rebinds
my $port2 = PostgreSQL::Test::Cluster::get_free_port();
reload(qq{ALTER SYSTEM SET source_writes.webhook_listen = '127.0.0.1:$port2'},
	qr/moves from 127\.0\.0\.1:$port to 127\.0\.0\.1:$port2.*?listening on 127\.0\.0\.1:$port2 \(HTTPS\)/s,
	'a reload that changes webhook_listen');
is(https($port2, "$dir/a.crt", 'h8'), '200 1 row', 'the new port answers');
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
	my $errno = $! + 0;
	ok(!defined $sock && $errno == ECONNREFUSED, 'the old port refuses the connection');
}
is(postmaster_pid(), $postmaster, 'without a restart of PostgreSQL');
is(webhook_pid(), $worker, 'nor of the webhook worker');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM hits}), 'h1,h2,h3,h4,h5,h5b,h6,h7,h8',
	'every 200 wrote its row, and nothing else was written');

# a reload to an address that is taken: the server serves the previous one
# again
{
	my $port3 = PostgreSQL::Test::Cluster::get_free_port();
	my $taken = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port3,
		Proto => 'tcp', Listen => 1, ReuseAddr => 1) or die "listen: $!";
	$from = reload(qq{ALTER SYSTEM SET source_writes.webhook_listen = '127.0.0.1:$port3'},
		qr/configuration was not reloaded.*?listening on 127\.0\.0\.1:$port2 \(HTTPS\)/s,
		'a reload to a port that another program holds');
	like(slurp_file($node->logfile, $from),
		qr/webhook server cannot start\n.*DETAIL:  could not serve on 127\.0\.0\.1:$port3: .*Address already in use/,
		'is refused, saying why');
	is(https($port2, "$dir/a.crt", 'h9'), '200 1 row', 'and the previous address serves again');
	close $taken;
	sql(qq{ALTER SYSTEM SET source_writes.webhook_listen = '127.0.0.1:$port2'});
}

# at start, a key file that others can read is an error: the server stays
# down, the reason in the log, until the file is fixed
chmod 0644, "$data/webhook.key";
$from = -s $node->logfile;
$node->restart;
ok($node->wait_for_log(qr/webhook server private key file "webhook\.key" has group or world access/, $from),
	'at start, a key file with world access: the reason is in the log');
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port2, Proto => 'tcp');
	ok(!defined $sock, 'and the server does not listen');
}
is(sql('SELECT 1'), '1', 'while PostgreSQL runs');
unlike(slurp_file($node->logfile, $from), qr/webhook server listening on/, 'the webhook server never started');
chmod 0600, "$data/webhook.key";
ok($node->wait_for_log(qr/listening on 127\.0\.0\.1:$port2 \(HTTPS\)/, $from),
	'once the file is fixed, the worker starts again');
is(https($port2, "$dir/a.crt", 'h10'), '200 1 row', 'and serves');

# the log holds nothing of the files (its messages name the PEM markers
# that a file must hold, but never a file's end marker or contents), and
# nothing crashed
$log = slurp_file($node->logfile);
unlike($log, qr/-----END /, 'the log shows no PEM block');
for my $file ('a.key', 'b.key', 'leaf.key', 'a.crt', 'b.crt', 'chain.crt')
{
	my @lines = grep { !/^-----/ && length($_) >= 16 } split /\n/, slurp_file("$dir/$file");
	ok(@lines > 0, "$file has a body");
	is(scalar(grep { index($log, $_) >= 0 } @lines), 0, "no line of $file is in the log");
}
unlike($log, qr/terminated by signal/, 'no process crashed');

done_testing();
