# What clients that cannot sign can do to a signed webhook source table,
# and to the server.  They cannot tell that the table exists: a post
# without its signature header gets, byte for byte, the answer of an
# address with no table, before its body is read.  Their refusals do not
# each write a log line.  And they cannot starve the server of connections:
# connections that have not sent a request's line and headers within 5 s
# are closed (while a connection between requests may stay idle for 30 s),
# and past 128 connections from one address or 512 in all, a new one
# closes an old one (of the address that has the most, past 512); under
# slow (slowloris) and idle connections from two addresses, from a
# hundred, and from the sender's own address, a signed post is answered
# within a second (also when the idle connections each had a request
# answered first, also when they are opened without end and the post
# comes slowly, also under connections that never read their answers,
# and under connections that hold all the memory for bodies).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use IO::Poll qw(POLLIN);
use IO::Socket::INET;
use POSIX ();
use Socket qw(IPPROTO_TCP SOL_SOCKET SO_RCVBUF TCP_MAXSEG inet_aton pack_sockaddr_in);
use Time::HiRes qw(time usleep);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('hostile', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $secret = 'whsec-hostile';

sub sql { return $node->safe_psql('postgres', $_[0]); }

$SIG{PIPE} = 'IGNORE';		# writes to connections the server closed fail

# A connection from a local address (127.0.0.1 unless given: on Linux the
# whole of 127/8 is this host's), or undef.
sub connect_from
{
	my ($address) = @_;
	return IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp',
		Timeout => 10, $address ? (LocalAddr => $address) : ());
}

# What the server answers on a connection within $timeout seconds, as it
# sent it; '' if nothing.  With $whole, until the server closes the
# connection (else until one answer is in).
sub raw_answer
{
	my ($sock, $timeout, $whole) = @_;
	my $poll = IO::Poll->new;
	my $end = time + $timeout;
	my $buf = '';
	$poll->mask($sock => POLLIN);
	while (time < $end)
	{
		last unless $poll->poll($end - time) > 0;
		my $n = sysread($sock, $buf, 65536, length $buf);
		last unless $n;
		next if $whole;
		if ($buf =~ /^(.*?\r\n)\r\n/s)
		{
			my ($head, $start) = ($1, length($1) + 2);
			my ($len) = $head =~ /^Content-Length: *(\d+)\r$/mi;
			last if $head !~ /^HTTP\/1\.1 1\d\d /
			  && defined $len && length($buf) - $start >= $len;
		}
	}
	return $buf;
}

# "status body" of an answer, the body without its newline; '' if none
sub status_of
{
	my ($raw) = @_;
	return '' unless $raw =~ m{^HTTP/1\.\d (\d+) [^\r]*\r\n.*?\r\n\r\n(.*)$}s;
	my ($status, $body) = ($1, $2);
	$body =~ s/\n$//;
	return "$status $body";
}

# Send raw bytes on a new connection: what the server answers (with
# $timeout, all it sends within it, and "(closed)" if it closed the
# connection then; else its first answer)
sub raw
{
	my ($data, $timeout) = @_;
	my $sock = connect_from() or die "cannot connect to the webhook server: $!";
	syswrite($sock, $data);
	my $answer = raw_answer($sock, $timeout // 5, defined $timeout);
	$answer .= '(closed)' if defined $timeout && closed_by_server($sock);
	close $sock;
	return $answer;
}

# A signed post of a row, on a new connection (or on $sock, kept alive),
# its request sent $delay seconds after the connection is made (if given:
# a slow link, a TLS handshake): ("status body", seconds it took)
sub signed_post
{
	my ($id, $sock, $delay) = @_;
	my $body = qq({"id": "$id"});
	my $t0 = time;
	my $keep = defined $sock;
	$sock //= connect_from();
	return ("cannot connect: $!", time - $t0) unless $sock;
	usleep($delay * 1_000_000) if $delay;
	syswrite($sock, "POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\n"
		  . "Content-Type: application/json\r\nX-Signature: " . hmac_sha256_hex($body, $secret) . "\r\n"
		  . ($keep ? '' : "Connection: close\r\n")
		  . "Content-Length: " . length($body) . "\r\n\r\n$body");
	my $answer = status_of(raw_answer($sock, 10, 0));
	close $sock unless $keep;
	return ($answer, time - $t0);
}

# Of these connections, those the server has closed: each is readable
# (the server sends them nothing: they are at their end, or reset)
sub closed_by_server
{
	my @socks = @_;
	my $poll = IO::Poll->new;
	$poll->mask($_ => POLLIN) for @socks;
	$poll->poll(0);
	return grep {
		my $n = $poll->events($_) ? sysread($_, my $buf, 1) : 1;
		!$n;
	} @socks;
}

# The signed posts of an attack: every one answered 200, the slowest (s)
my @posts;

sub check_posts
{
	my ($what) = @_;
	my @bad = grep { $_->[0] ne '200 1 row' } @posts;
	my $slowest = 0;
	$slowest = $_->[1] > $slowest ? $_->[1] : $slowest for @posts;
	note(sprintf("%s: %d signed posts, the slowest in %.3f s", $what, scalar @posts, $slowest));
	is(scalar @bad, 0, "$what: every signed post is answered 200")
	  or diag(join("\n", map { "$_->[0] in $_->[1] s" } @bad));
	cmp_ok($slowest, '<', 1, "$what: each within a second");
	@posts = ();
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret 'whsec-hostile');
	CREATE FOREIGN TABLE signed (id text) SERVER hooks
	  OPTIONS (format 'json', signature_header 'X-Signature', max_body_bytes '100')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
is((signed_post('first'))[0], '200 1 row', 'a signed post: 200');

# ---------------------------------------------------------------------
# A post without the signature header gets what a post to no table gets,
# byte for byte (but for the Date header's time), before its body is read,
# however it comes.

{
	my @cases = (
		[ 'a body', "Content-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"id\": \"u\"}\n" ],
		[ 'no body', "Content-Length: 0\r\n\r\n" ],
		[ 'a body in chunks', "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"id\"\r\n7\r\n: \"u\"}\n\r\n0\r\n\r\n" ],
		[ 'a type the table cannot take', "Content-Type: image/png\r\nContent-Length: 1\r\n\r\nx" ],
		[ 'a body over the limit, not sent', "Content-Length: 1000\r\n\r\n" ],
		[ 'Expect: 100-continue, the body not sent', "Expect: 100-continue\r\nContent-Length: 12\r\n\r\n" ],
		[ 'a wrong signature header', "X-Signatur: 00\r\nContent-Length: 12\r\n\r\n{\"id\": \"u\"}\n" ]);
	for my $case (@cases)
	{
		my ($what, $rest) = @$case;
		my %answer;
		for my $table ('signed', 'nosuch')
		{
			$answer{$table} = raw("POST /postgres/public/$table HTTP/1.1\r\nHost: x\r\n$rest", 1);
			$answer{$table} =~ s/^Date: [^\r]*\r$/Date: (a time)\r/mi;
		}
		like($answer{nosuch}, qr{^HTTP/1\.1 404 Not Found\r\n}, "$what, to no table: 404");
		is($answer{signed}, $answer{nosuch}, "$what, to the signed table unsigned: the same answer");
	}
}
is(sql(q{SELECT count(*) FROM signed}), '1', 'none wrote anything');
is(sql(q{SELECT refused, last_error FROM source_writes.sources WHERE source = 'signed'::regclass}),
	'7|404 the request has no signature header: it was answered as if there were no table at its address',
	'the sources view counts them, and says why');
like(slurp_file($node->logfile),
	qr{request to /postgres/public/signed refused with status 404\n.*DETAIL:  The request has no signature header: it was answered as if there were no table at its address\.},
	'the log says why');
like(status_of(raw("POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nX-Signature: 00\r\nContent-Length: 12\r\n\r\n{\"id\": \"w\"}\n")),
	qr/^403 the signature in header "X-Signature" does not match the body$/,
	'with the header, a wrong signature: 403');

# the map the server's threads look at may be stale: the worker's own look
# answers alike
sql(q{ALTER FOREIGN TABLE signed OPTIONS (SET signature_header 'X-Sig2')});
is(status_of(raw("POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nX-Signature: 00\r\nContent-Length: 0\r\n\r\n")),
	'404 no webhook source table at this address', 'a header renamed just now: 404 for the old one');
sql(q{ALTER FOREIGN TABLE signed OPTIONS (SET signature_header 'X-Signature')});
is(status_of(raw("POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nX-Sig2: 00\r\nContent-Length: 0\r\n\r\n")),
	'404 no webhook source table at this address', 'and back');

# while DDL holds the signed table, just after a change of the catalog
# (which the worker takes in with the post, the server's map stale): the
# answer to no table too, not "the table is being altered"
{
	my $ddl = $node->background_psql('postgres');
	$ddl->query_safe(q{BEGIN; ALTER FOREIGN TABLE signed OPTIONS (SET max_body_bytes '200')});
	sql(q{CREATE FOREIGN TABLE catalog_changed (id text) SERVER hooks OPTIONS (format 'json')});
	my %answer;
	for my $table ('signed', 'nosuch')
	{
		$answer{$table} = raw("POST /postgres/public/$table HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 1);
		$answer{$table} =~ s/^Date: [^\r]*\r$/Date: (a time)\r/mi;
	}
	is($answer{signed}, $answer{nosuch}, 'DDL holds the signed table: an unsigned post gets the same answer');
	$ddl->query_safe('ROLLBACK');
	$ddl->quit;
}

# ---------------------------------------------------------------------
# 50 posts with a wrong signature to a table: each counted, the first
# logged (with the status, not the signature), the others not at LOG

{
	sql(q{CREATE FOREIGN TABLE signed2 (id text) SERVER hooks
		OPTIONS (format 'json', signature_header 'X-Signature')});
	my $from = -s $node->logfile;
	my @statuses;
	for my $i (1 .. 50)
	{
		push @statuses, (split / /, status_of(raw(
			"POST /postgres/public/signed2 HTTP/1.1\r\nHost: x\r\nX-Signature: 0$i\r\nContent-Length: 12\r\n\r\n{\"id\": \"b\"}\n")))[0];
	}
	is(join(',', @statuses), join(',', ('403') x 50), '50 posts with a wrong signature: 403 each');
	is(sql(q{SELECT refused FROM source_writes.sources WHERE source = 'signed2'::regclass}), '50',
		'the sources view counts each');
	# (a refusal is logged, if at all, before it is answered)
	my @lines = slurp_file($node->logfile, $from) =~ /^(.*request to \/postgres\/public\/signed2 refused.*)$/mg;
	is(scalar @lines, 1, 'the log has one line of them');
	like($lines[0] // '', qr/LOG:  webhook request to \/postgres\/public\/signed2 refused with status 403$/,
		'the first, at LOG');
}

# ---------------------------------------------------------------------
# The attacks need many connections: as many files as the hard limit lets
# this process open, up to 4,000.

my ($soft, $hard) = map { chomp; $_ } (`sh -c 'ulimit -Sn'`, `sh -c 'ulimit -Hn'`);
my $want = $hard eq 'unlimited' || $hard > 4000 ? 4000 : $hard;
system('prlimit', "--pid=$$", "--nofile=$want:$hard") if $soft ne 'unlimited' && $soft < $want;
($soft) = map { chomp; $_ } `sh -c 'ulimit -Sn'`;
note("this process may open $soft files (hard limit $hard)");
my $idle_count = $soft eq 'unlimited' || $soft >= 3500 ? 3000 : $soft - 500;
cmp_ok($idle_count, '>', 600, 'enough files for the attacks');

# A connection that does not send a request's headers within 5 s of its
# opening is closed: one that sends nothing, and one that sends a byte
# every half second; one between requests is kept (idle for up to 30 s).
{
	my @waiting = map { connect_from('127.0.0.4') } 1 .. 10;
	my @dribbling = map {
		my $s = connect_from('127.0.0.4');
		syswrite($s, "POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nX-Dribble: ");
		$s;
	} 1 .. 10;
	my $opened = time;
	my $kept = connect_from('127.0.0.4');
	my ($answer) = signed_post('kept', $kept);
	is($answer, '200 1 row', 'a post on a connection kept alive: 200');
	my %closed_at;
	while (time - $opened < 9 && keys %closed_at < 20)
	{
		syswrite($_, 'a') for @dribbling;
		$closed_at{$_} //= time - $opened for closed_by_server(@waiting, @dribbling);
		usleep(500_000);
	}
	my @times = sort { $a <=> $b } values %closed_at;
	note(sprintf('closed after %.2f to %.2f s', $times[0] // -1, $times[-1] // -1));
	is(scalar @times, 20, 'the connections that send no request are closed');
	ok(@times && $times[0] >= 4.5 && $times[-1] < 7, 'at 5 s, those that send a byte now and then too');
	is(scalar(closed_by_server($kept)), 0, 'the connection between requests is kept');
	($answer) = signed_post('kept again', $kept);
	is($answer, '200 1 row', 'and takes the next');
	close $_ for @waiting, @dribbling, $kept;
}

# An attack: $count connections from @addresses (taken in turn), each
# sending nothing, or (those whose index $slow->($i) says) a request line
# and then a header byte by byte, or (with $served) a request answered
# 404, kept alive, and then nothing; every one the server closes is opened again.  First, until the server has made room (for up to 3 s, well before
# the first connections' 5 s), how many it keeps of each address at most.
# Then for $seconds, every 0.3 s, a signed post from 127.0.0.1 into @posts
# (and $also->() if given).  Returns the most connections of one address
# the server kept, and of all.
sub attack
{
	my (%a) = @_;
	my @addresses = @{ $a{addresses} };
	my $slow = $a{slow} // sub { 0 };
	my @socks;
	my $open = sub {
		my ($i) = @_;
		my $s = connect_from($addresses[$i % @addresses]);
		syswrite($s, "POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		  if $s && $slow->($i);
		if ($s && $a{served})
		{
			syswrite($s, "POST /postgres/public/nosuch HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
			raw_answer($s, 5, 0);	# 404, or nothing if it was closed at once
		}
		return $s;
	};
	my $t0 = time;
	for my $i (0 .. $a{count} - 1)
	{
		$socks[$i] = $open->($i) or die "cannot open connection $i: $!";
	}
	note(sprintf('%d connections opened in %.2f s', $a{count}, time - $t0));

	# what the server keeps, once it has taken in the connections
	my ($per_address, $all);
	my $until = time + 3;
	do
	{
		usleep(100_000);
		my %closed = map { ($_ => 1) } closed_by_server(@socks);
		my %kept;
		$kept{ $addresses[$_ % @addresses] }++ for grep { !$closed{ $socks[$_] } } 0 .. $#socks;
		$all = @socks - keys %closed;
		($per_address) = sort { $b <=> $a } values %kept;
	} while ($all > 512 || $per_address > 128) && time < $until;
	note(sprintf('%.2f s after the first connection: %d kept, at most %d of one address',
		time - $t0, $all, $per_address));

	my $end = time + $a{seconds};
	while (time < $end)
	{
		push @posts, [ signed_post('legit') ];
		$a{also}->() if $a{also};
		my %closed = map { ($_ => 1) } closed_by_server(@socks);
		for my $i (0 .. $#socks)
		{
			if ($closed{ $socks[$i] })
			{
				close $socks[$i];
				$socks[$i] = $open->($i) // die "cannot open connection $i again: $!";
			}
			elsif ($slow->($i))
			{
				syswrite($socks[$i], 'a');
			}
		}
		usleep(300_000);
	}
	close $_ for @socks;
	return ($per_address, $all);
}

# slowloris from two addresses: 300 connections, a header byte each every
# 0.3 s, opened again when closed
my ($per_address, $all) = attack(addresses => [ '127.0.0.2', '127.0.0.3' ], count => 300,
	slow => sub { 1 }, seconds => 8);
check_posts('300 slow connections from 2 addresses');
cmp_ok($per_address, '<=', 128, 'of 150 from one address, the server keeps 128 at most');

# idle connections from a hundred addresses
($per_address, $all) = attack(addresses => [ map { "127.0.1.$_" } 1 .. 100 ], count => $idle_count,
	seconds => 4);
check_posts("$idle_count idle connections from 100 addresses");
cmp_ok($all, '<=', 512, 'of them the server keeps 512 at most');

# idle connections from a hundred addresses that each had a request
# answered first (so that they are not new ones that wait for theirs)
($per_address, $all) = attack(addresses => [ map { "127.0.2.$_" } 1 .. 100 ], count => 1000,
	served => 1, seconds => 4);
check_posts('1000 connections from 100 addresses, idle after a request');
cmp_ok($all, '<=', 512, 'of them the server keeps 512 at most');

# from the sender's own address: 100 idle and 100 slow connections, while
# the sender posts on new connections, and on one that it keeps alive (a
# reverse proxy's)
{
	my $proxy = connect_from();
	my @on_proxy = ([ signed_post('legit', $proxy) ]);
	($per_address, $all) = attack(addresses => ['127.0.0.1'], count => 200, slow => sub { $_[0] % 2 },
		seconds => 4, also => sub { push @on_proxy, [ signed_post('legit', $proxy) ] });
	check_posts("200 connections from the sender's own address");
	cmp_ok($per_address, '<=', 128, 'the server keeps 128 at most');
	@posts = @on_proxy;
	check_posts('on the connection the sender keeps alive');
	close $proxy;
}

# Connections from six addresses, each idle after a request answered (a
# 404, kept alive), opened without end by another process, so that each
# new one is past the limit of all and closes another; meanwhile signed
# posts whose request comes 0.2 s after their connection (a slow link, a
# TLS handshake).  What is closed is of the addresses that have the most.
{
	pipe(my $ready_r, my $ready_w) or die "cannot make a pipe: $!";
	my $end = time + 10;
	my $pid = fork() // die "cannot fork: $!";
	if ($pid == 0)
	{
		close $ready_r;
		my ($told, @socks) = (0);
		for (my $i = 0; time < $end; $i++)
		{
			my $s = connect_from('127.0.3.' . (1 + $i % 6)) or next;
			syswrite($s, "POST /postgres/public/nosuch HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
			raw_answer($s, 5, 0);
			push @socks, $s;
			$told = syswrite($ready_w, "ready\n") if @socks >= 600 && !$told;
			next if $i % 100 != 99;
			my %closed = map { ($_ => 1) } closed_by_server(@socks);
			close $_ for grep { $closed{$_} } @socks;
			@socks = grep { !$closed{$_} } @socks;
		}
		POSIX::_exit(0);
	}
	close $ready_w;
	my $ready = <$ready_r>;
	ok(defined $ready, 'the connections idle after a request are opened');
	my $until = time + 4;
	while (time < $until)
	{
		push @posts, [ signed_post('legit', undef, 0.2) ];
		usleep(300_000);
	}
	kill 'KILL', $pid;
	waitpid($pid, 0);
	check_posts('connections idle after a request from 6 addresses, opened without end');
}

# Connections from four addresses that each send 400 requests at once
# (each answered 404, as a post without the signature header is) and never
# read the answers, with a small receive window: the server's buffer for
# them fills, and their answers stop going.
{
	my $requests = "POST /postgres/public/signed HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" x 400;
	my @stuck;
	for my $i (0 .. 511)
	{
		my $s = IO::Socket::INET->new(Proto => 'tcp', LocalAddr => '127.0.4.' . (1 + $i % 4))
		  or die "cannot make a socket: $!";
		setsockopt($s, SOL_SOCKET, SO_RCVBUF, 1024) or die "cannot set SO_RCVBUF: $!";
		setsockopt($s, IPPROTO_TCP, TCP_MAXSEG, 536) or die "cannot set TCP_MAXSEG: $!";
		connect($s, pack_sockaddr_in($port, inet_aton('127.0.0.1'))) or die "cannot connect: $!";
		syswrite($s, $requests);
		push @stuck, $s;
	}

	# until the worker has answered what it will (it counts each refusal)
	my ($refused, $before) = (0, -1);
	while ($refused != $before)
	{
		$before = $refused;
		usleep(1_000_000);
		$refused = sql(q{SELECT refused FROM source_writes.sources WHERE source = 'signed'::regclass});
	}
	note("the worker answered $refused requests");
	push @posts, [ signed_post('legit') ] for 1 .. 5;
	check_posts('512 connections from 4 addresses whose answers do not go');
	close $_ for @stuck;
}

# Connections from two addresses that each send 4 MB of a 5 MB body (to a
# table without a signature, as to a signed one with anything in its
# signature header) and then a byte now and then: 256 MB of bodies, as
# much as the server holds, but a small body still has room
{
	sql(q{CREATE FOREIGN TABLE big (id text) SERVER hooks OPTIONS (format 'json', max_body_bytes '8MB')});
	my $part = ' ' x 4_000_000;
	my @holding;
	for my $i (0 .. 69)
	{
		my $s = connect_from('127.0.5.' . (1 + $i % 2)) or die "cannot connect: $!";
		syswrite($s, "POST /postgres/public/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			  . "Content-Length: 5000000\r\n\r\n[$part");
		push @holding, $s;
	}
	my $until = time + 3;
	while (time < $until)
	{
		push @posts, [ signed_post('legit') ];
		syswrite($_, ' ') for @holding;
		usleep(300_000);
	}
	check_posts('70 connections that hold 4 MB of body each');
	close $_ for @holding;
}

# after all that: the same worker serves, and wrote only the signed rows
is((signed_post('after'))[0], '200 1 row', 'after the attacks: 200');
is(sql(q{SELECT count(*) FILTER (WHERE id NOT IN ('first', 'kept', 'kept again', 'legit', 'after'))
	FROM signed}), '0', 'only signed posts were written');
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'nothing crashed');

done_testing();
