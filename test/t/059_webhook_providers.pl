# Webhooks as real providers send them, over HTTP: each signature scheme's
# accepted, tampered, wrong-secret, expired and future requests (signed
# here as each provider documents, with Digest::SHA, never with our own
# code); several signatures at once; the provider's delivery id as the
# default idempotency key, and idempotency_field; the handshakes of Slack,
# Twitch, Zoom and Meta, answered without a row written, signed where the
# provider signs them, also through the relay of another database.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha1_hex hmac_sha256 hmac_sha256_hex);
use MIME::Base64 qw(encode_base64 decode_base64);
use POSIX qw(strftime);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('providers', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port";

sub sql { my ($q, $db) = @_; return $node->safe_psql($db // 'postgres', $q); }

# a request with curl: (status, content type, body exactly as answered)
sub call
{
	my ($method, $path, $body, @headers) = @_;
	my @cmd = ('curl', '-s', '-X', $method, '-o', '-', '-w', "\n%{http_code} %{content_type}",
		"$base$path");
	push @cmd, '--data-binary', $body if defined $body;
	push @headers, 'Content-Type: application/json'
	  if defined $body && !grep { /^content-type:/i } @headers;
	push @cmd, map { ('-H', $_) } @headers;
	my ($out) = run_command(\@cmd);
	my $cut = rindex($out, "\n");
	my ($status, $type) = split / /, substr($out, $cut + 1), 2;
	return ($status, $type, substr($out, 0, $cut));
}

# "status body", the body's trailing newline cut
sub post
{
	my ($status, $type, $text) = call('POST', @_);
	$text =~ s/\n$//;
	return "$status $text";
}

my $secret = 'It\'s a Secret to Everybody';
my $std_key = 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';	# the base64 of a whsec_ secret
sql(qq{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks
	  OPTIONS (secret '@{[ $secret =~ s/'/''/gr ]}', previous_secret 'old-secret');
	CREATE SERVER hooks_std FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks_std OPTIONS (secret 'whsec_$std_key');
	CREATE FOREIGN TABLE gh (doc text) SERVER hooks
	  OPTIONS (format 'text', signature_scheme 'github');
	CREATE FOREIGN TABLE shop (id text) SERVER hooks OPTIONS (signature_scheme 'shopify');
	CREATE FOREIGN TABLE stripe (id text, type text) SERVER hooks
	  OPTIONS (signature_scheme 'stripe', idempotency_field 'id');
	CREATE FOREIGN TABLE std (id text) SERVER hooks_std OPTIONS (signature_scheme 'standard');
	CREATE FOREIGN TABLE slack (event_id text, doc jsonb OPTIONS (source 'body')) SERVER hooks
	  OPTIONS (signature_scheme 'slack', idempotency_field 'event_id');
	CREATE FOREIGN TABLE twitch (doc jsonb OPTIONS (source 'body')) SERVER hooks
	  OPTIONS (signature_scheme 'twitch');
	CREATE FOREIGN TABLE paddle (notification_id text) SERVER hooks
	  OPTIONS (signature_scheme 'paddle', signature_tolerance '5 min');
	CREATE FOREIGN TABLE segment (id text) SERVER hooks OPTIONS (signature_scheme 'segment');
	CREATE FOREIGN TABLE tok (id text) SERVER hooks
	  OPTIONS (signature_scheme 'token', signature_header 'Authorization');
	CREATE FOREIGN TABLE meta (object text) SERVER hooks OPTIONS (signature_scheme 'meta');
	CREATE FOREIGN TABLE zoom (event text) SERVER hooks OPTIONS (signature_scheme 'zoom');
	CREATE FOREIGN TABLE open (id text) SERVER hooks});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/), 'the server listens');

my $now = time;

#
# 1. each scheme: accepted, tampered, wrong secret; the timestamped ones
#    also expired and from the future
#

# GitHub's documented example: this secret, "Hello, World!", and the
# signature its docs give for them
is(post('/postgres/public/gh', 'Hello, World!', 'Content-Type: text/plain',
	'X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'),
	'200 1 row', 'github: GitHub\'s documented example is accepted');
is(post('/postgres/public/gh', 'Hello, World?', 'Content-Type: text/plain',
	'X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'),
	'403 the request\'s github signature does not match', 'github: a tampered body: 403');
is(post('/postgres/public/gh', 'x', 'Content-Type: text/plain',
	'X-Hub-Signature-256: sha256=' . hmac_sha256_hex('x', 'guess')),
	'403 the request\'s github signature does not match', 'github: a wrong secret: 403');
is(post('/postgres/public/gh', 'y', 'Content-Type: text/plain',
	'X-Hub-Signature-256: sha256=' . hmac_sha256_hex('y', 'old-secret')),
	'200 1 row', 'github: signed with the previous secret: 200');

sub shopify { return 'X-Shopify-Hmac-Sha256: ' . encode_base64(hmac_sha256($_[0], $_[1] // $secret), ''); }
is(post('/postgres/public/shop', '{"id": "s1"}', shopify('{"id": "s1"}')), '200 1 row',
	'shopify: base64 of the body\'s HMAC: 200');
is(post('/postgres/public/shop', '{"id": "s2"}', shopify('{"id": "s1"}')),
	'403 the request\'s shopify signature does not match', 'shopify: tampered: 403');
is(post('/postgres/public/shop', '{"id": "s2"}', shopify('{"id": "s2"}', 'guess')),
	'403 the request\'s shopify signature does not match', 'shopify: a wrong secret: 403');

sub segment { return 'X-Signature: ' . hmac_sha1_hex($_[0], $_[1] // $secret); }
is(post('/postgres/public/segment', '{"id": "g1"}', segment('{"id": "g1"}')), '200 1 row',
	'segment: hex HMAC-SHA1 of the body: 200');
is(post('/postgres/public/segment', '{"id": "g2"}', segment('{"id": "g1"}')),
	'403 the request\'s segment signature does not match', 'segment: tampered: 403');
is(post('/postgres/public/segment', '{"id": "g2"}', 'X-Signature: ' . hmac_sha256_hex('{"id": "g2"}', $secret)),
	'403 the request\'s segment signature does not match', 'segment: a SHA-256 signature: 403');

is(post('/postgres/public/tok', '{"id": "t1"}', "Authorization: $secret"), '200 1 row',
	'token: the secret in the header: 200');
is(post('/postgres/public/tok', '{"id": "t2"}', "Authorization: ${secret}x"),
	'403 the request\'s token signature does not match', 'token: another token: 403');
is(post('/postgres/public/tok', '{"id": "t3"}'), '404 no webhook source table at this address',
	'token: no header: 404, as to no table');

# Slack: v0:<timestamp>:<body>, "v0=" and hex
sub slack
{
	my ($t, $body, $key) = @_;
	return ("X-Slack-Request-Timestamp: $t",
		'X-Slack-Signature: v0=' . hmac_sha256_hex("v0:$t:$body", $key // $secret));
}
my $ev = '{"type": "event_callback", "event_id": "Ev1", "event": {"type": "message"}}';
is(post('/postgres/public/slack', $ev, slack($now, $ev)), '200 1 row', 'slack: signed: 200');
my $ev2 = '{"type": "event_callback", "event_id": "Ev2"}';
is(post('/postgres/public/slack', $ev2, slack($now, $ev)),
	'403 the request\'s slack signature does not match', 'slack: tampered: 403');
is(post('/postgres/public/slack', $ev2, slack($now, $ev2, 'guess')),
	'403 the request\'s slack signature does not match', 'slack: a wrong secret: 403');
is(post('/postgres/public/slack', $ev2, slack($now - 301, $ev2)),
	'401 the timestamp of the request\'s slack signature is outside the window of signature_tolerance',
	'slack: older than five minutes: 401');
# ahead of the clock: from a fresh reading of it (the server's goes on, and
# a second ticked since $now would bring $now + 301 within the window),
# with some seconds to spare for a slow machine
is(post('/postgres/public/slack', $ev2, slack(time + 310, $ev2)),
	'401 the timestamp of the request\'s slack signature is outside the window of signature_tolerance',
	'slack: five minutes ahead: 401');

# Twitch: <id><RFC 3339 timestamp><body>, "sha256=" and hex
sub twitch
{
	my ($id, $t, $body, $type, $key) = @_;
	my $ts = strftime('%Y-%m-%dT%H:%M:%S.123456789Z', gmtime($t));
	return ("Twitch-Eventsub-Message-Id: $id", "Twitch-Eventsub-Message-Timestamp: $ts",
		"Twitch-Eventsub-Message-Type: $type",
		'Twitch-Eventsub-Message-Signature: sha256=' . hmac_sha256_hex("$id$ts$body", $key // $secret));
}
my $note = '{"subscription": {"type": "channel.follow"}, "event": {"user_id": "1"}}';
is(post('/postgres/public/twitch', $note, twitch('m1', $now, $note, 'notification')), '200 1 row',
	'twitch: a signed notification: 200');
is(post('/postgres/public/twitch', "$note ", twitch('m2', $now, $note, 'notification')),
	'403 the request\'s twitch signature does not match', 'twitch: tampered: 403');
is(post('/postgres/public/twitch', $note, twitch('m3', $now - 601, $note, 'notification')),
	'401 the timestamp of the request\'s twitch signature is outside the window of signature_tolerance',
	'twitch: older than ten minutes: 401');
is(post('/postgres/public/twitch', $note, twitch('m4', time + 610, $note, 'notification')),
	'401 the timestamp of the request\'s twitch signature is outside the window of signature_tolerance',
	'twitch: ten minutes ahead: 401');
is(post('/postgres/public/twitch', $note, twitch('m5', $now - 500, $note, 'notification')),
	'200 1 row', 'twitch: within its ten minutes: 200');

# Paddle: "ts=<ts>;h1=<hex>" of <ts>:<body>; one h1 for each secret while
# one is rotated
my $pad = '{"notification_id": "ntf_1"}';
my $h1 = hmac_sha256_hex("$now:$pad", $secret);
is(post('/postgres/public/paddle', $pad, "Paddle-Signature: ts=$now;h1=" . hmac_sha256_hex("$now:$pad", 'guess') . ";h1=$h1"),
	'200 1 row', 'paddle: several h1, one right: 200');
is(post('/postgres/public/paddle', $pad, "Paddle-Signature: ts=$now;h1=" . hmac_sha256_hex("$now:$pad", 'guess')),
	'403 the request\'s paddle signature does not match', 'paddle: only a wrong one: 403');
my $old = $now - 400;
is(post('/postgres/public/paddle', $pad, "Paddle-Signature: ts=$old;h1=" . hmac_sha256_hex("$old:$pad", $secret)),
	'401 the timestamp of the request\'s paddle signature is outside the window of signature_tolerance',
	'paddle: outside the table\'s signature_tolerance: 401');

#
# 2. idempotency: the provider's delivery id, or a field of the body
#
is(post('/postgres/public/gh', 'push 1', 'Content-Type: text/plain', 'X-GitHub-Delivery: d-1',
	'X-Hub-Signature-256: sha256=' . hmac_sha256_hex('push 1', $secret)), '200 1 row',
	'github: a delivery');
is(post('/postgres/public/gh', 'push 1', 'Content-Type: text/plain', 'X-GitHub-Delivery: d-1',
	'X-Hub-Signature-256: sha256=' . hmac_sha256_hex('push 1', $secret)), '200 1 row',
	'github: redelivered with the same X-GitHub-Delivery: 200, the first answer');
is(post('/postgres/public/gh', 'push 2', 'Content-Type: text/plain', 'X-GitHub-Delivery: d-1',
	'X-Hub-Signature-256: sha256=' . hmac_sha256_hex('push 2', $secret)),
	'422 this idempotency key came before with another body', 'github: the same delivery id with another body: 422');
is(sql(q{SELECT count(*) FROM gh WHERE doc = 'push 1'}), '1', 'github: written once');

is(post('/postgres/public/shop', '{"id": "s3"}', 'X-Shopify-Webhook-Id: w-1', shopify('{"id": "s3"}')),
	'200 1 row', 'shopify: a delivery');
is(post('/postgres/public/shop', '{"id": "s3"}', 'X-Shopify-Webhook-Id: w-1', shopify('{"id": "s3"}')),
	'200 1 row', 'shopify: sent again with its X-Shopify-Webhook-Id');
is(sql(q{SELECT count(*) FROM shop WHERE id = 's3'}), '1', 'shopify: written once');

# Standard Webhooks: webhook-id is the key; a retry is signed again, later
sub standard
{
	my ($id, $t, $body, $prefix) = @_;
	$prefix //= 'webhook';
	my $sig = encode_base64(hmac_sha256("$id.$t.$body", decode_base64($std_key)), '');
	return ("$prefix-id: $id", "$prefix-timestamp: $t", "$prefix-signature: v1,$sig");
}
is(post('/postgres/public/std', '{"id": "m1"}', standard('msg_1', $now - 60, '{"id": "m1"}')),
	'200 1 row', 'standard: a delivery');
is(post('/postgres/public/std', '{"id": "m1"}', standard('msg_1', $now, '{"id": "m1"}')),
	'200 1 row', 'standard: its retry, signed again: 200');
is(post('/postgres/public/std', '{"id": "m1"}', standard('msg_1', $now, '{"id": "m1"}', 'svix')),
	'200 1 row', 'standard: and with the svix- names, svix-id the key');
my ($id, $t, $sig) = standard('msg_2', $now, '{"id": "m2"}');
$sig =~ s/: v1,/: v1,AAAA v1,/;
is(post('/postgres/public/std', '{"id": "m2"}', $id, $t, $sig), '200 1 row',
	'standard: several signatures, one right: 200');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM std}), 'm1,m2', 'standard: each written once');

# Twitch: Twitch-Eventsub-Message-Id
is(post('/postgres/public/twitch', $note, twitch('m1', $now, $note, 'notification')), '200 1 row',
	'twitch: a notification sent again');
is(sql(q{SELECT count(*) FROM twitch}), '2', 'twitch: not written again');

# Stripe's event id is in the body: idempotency_field 'id'
sub stripe
{
	my ($t, $body, @keys) = @_;
	return 'Stripe-Signature: t=' . $t . join('', map { ',v1=' . hmac_sha256_hex("$t.$body", $_) } @keys);
}
my $evt = '{"id": "evt_1", "type": "charge.succeeded"}';
is(post('/postgres/public/stripe', $evt, stripe($now - 100, $evt, $secret)), '200 1 row', 'stripe: an event');
is(post('/postgres/public/stripe', $evt, stripe($now, $evt, 'guess', $secret)), '200 1 row',
	'stripe: its retry, signed again (and twice): 200');
is(post('/postgres/public/stripe', '{"id": "evt_1", "type": "other"}',
	stripe($now, '{"id": "evt_1", "type": "other"}', $secret)),
	'422 this idempotency key came before with another body', 'stripe: the same id, another body: 422');
is(post('/postgres/public/stripe', '{"id": {"x": 1}}', stripe($now, '{"id": {"x": 1}}', $secret)),
	'400 the idempotency key in field "id" must be a string or a number',
	'stripe: an id that is an object: 400');
is(post('/postgres/public/stripe', '{"id": true}', stripe($now, '{"id": true}', $secret)),
	'400 the idempotency key in field "id" must be a string or a number',
	'stripe: an id that is a boolean: 400');
is(post('/postgres/public/stripe', '{"type": "no id"}', stripe($now, '{"type": "no id"}', $secret)),
	'200 1 row', 'stripe: an event without the field is written as one without a key');
is(post('/postgres/public/stripe', '{"id": 42, "type": "n"}', stripe($now, '{"id": 42, "type": "n"}', $secret)),
	'200 1 row', 'stripe: a number is a key');
is(post('/postgres/public/stripe', '{"id": 42, "type": "n"}', stripe($now, '{"id": 42, "type": "n"}', $secret)),
	'200 1 row', 'stripe: and its retry writes nothing');
# escapes PostgreSQL cannot make text of, in a field before the key
for my $b ('{"type": "nul", "data": {"note": "a\\u0000b"}, "id": "evt_nul"}',
	'{"type": "surrogate", "data": {"note": "\\udc00"}, "id": "evt_sur"}')
{
	is(post('/postgres/public/stripe', $b, stripe($now, $b, $secret)), '200 1 row',
		"stripe: a body with an escape PostgreSQL cannot read: $b");
	is(post('/postgres/public/stripe', $b, stripe($now, $b, $secret)), '200 1 row',
		'stripe: its retry writes nothing all the same');
}
is(sql(q{SELECT string_agg(coalesce(id, '-') || ':' || type, ',' ORDER BY id) FROM stripe}),
	'42:n,evt_1:charge.succeeded,evt_nul:nul,evt_sur:surrogate,-:no id', 'stripe: each event once');

# Slack's event_id
is(post('/postgres/public/slack', $ev, slack($now, $ev)), '200 1 row', 'slack: an event sent again');
is(sql(q{SELECT string_agg(event_id, ',') FROM slack}), 'Ev1', 'slack: written once');

#
# 3. handshakes: answered, nothing written, signed where the provider signs
#
my $verify = '{"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}';
my @answer = call('POST', '/postgres/public/slack', $verify, slack($now, $verify));
is_deeply(\@answer, [ '200', 'text/plain; charset=utf-8', '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' ],
	'slack: url_verification is answered with its challenge, as plain text');
is(post('/postgres/public/slack', $verify, 'X-Slack-Request-Timestamp: ' . $now),
	'404 no webhook source table at this address', 'slack: an unsigned url_verification: 404');
is(post('/postgres/public/slack', $verify, slack($now, $verify, 'guess')),
	'403 the request\'s slack signature does not match', 'slack: one with a wrong signature: 403');
is(post('/postgres/public/slack', $verify, slack($now - 3600, $verify)),
	'401 the timestamp of the request\'s slack signature is outside the window of signature_tolerance',
	'slack: an old one, replayed: 401');
my $nochallenge = '{"type": "url_verification"}';
is(post('/postgres/public/slack', $nochallenge, slack($now, $nochallenge)),
	'400 the Slack url_verification request has no challenge', 'slack: one without a challenge: 400');

my $cb = '{"challenge": "pogchamp-kappa-360noscope-vohiyo", "subscription": {"type": "channel.follow"}}';
@answer = call('POST', '/postgres/public/twitch', $cb, twitch('v1', $now, $cb, 'webhook_callback_verification'));
is_deeply(\@answer, [ '200', 'text/plain; charset=utf-8', 'pogchamp-kappa-360noscope-vohiyo' ],
	'twitch: webhook_callback_verification is answered with the challenge, as plain text');
is(post('/postgres/public/twitch', $cb, twitch('v2', $now, $cb, 'webhook_callback_verification', 'guess')),
	'403 the request\'s twitch signature does not match', 'twitch: a wrongly signed verification: 403');
my $rev = '{"subscription": {"status": "authorization_revoked"}}';
is(post('/postgres/public/twitch', $rev, twitch('r1', $now, $rev, 'revocation')), '200 1 row',
	'twitch: a revocation is a row');

sub zoom
{
	my ($t, $body, $key) = @_;
	return ("x-zm-request-timestamp: $t", 'x-zm-signature: v0=' . hmac_sha256_hex("v0:$t:$body", $key // $secret));
}
my $val = '{"payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"}, "event_ts": 1654503849680, "event": "endpoint.url_validation"}';
@answer = call('POST', '/postgres/public/zoom', $val, zoom($now, $val));
is_deeply(\@answer, [ '200', 'application/json',
	'{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"' . hmac_sha256_hex('qgg8vlvZRS6UYooatFL8Aw', $secret) . '"}' ],
	'zoom: endpoint.url_validation is answered with plainToken and its HMAC, as JSON');
is(post('/postgres/public/zoom', $val), '404 no webhook source table at this address',
	'zoom: an unsigned validation: 404');
is(post('/postgres/public/zoom', $val, zoom($now - 301, $val)),
	'401 the timestamp of the request\'s zoom signature is outside the window of signature_tolerance',
	'zoom: an old validation: 401');
my $started = '{"event": "meeting.started", "payload": {}}';
is(post('/postgres/public/zoom', $started, zoom($now, $started)), '200 1 row', 'zoom: an event is a row');
is(post('/postgres/public/zoom', $started, zoom($now, "$started ")),
	'403 the request\'s zoom signature does not match', 'zoom: tampered: 403');

# Meta: GET ?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...,
# which Meta does not sign
@answer = call('GET', '/postgres/public/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock');
is("$answer[0] $answer[2]", "403 the verify token does not match\n", 'meta: without a verify_token in the mapping: 403');
like(slurp_file($node->logfile),
	qr{LOG:  webhook request to /postgres/public/meta refused with status 403\n.*DETAIL:  The owner's user mapping for the table's server has no verify_token for Meta's subscription handshake\.},
	'and the log says what is missing');
is(sql(q{SELECT refused || ' ' || last_error FROM source_writes.sources WHERE source = 'meta'::regclass}),
	'1 403 the owner\'s user mapping has no verify_token for Meta\'s subscription handshake',
	'so does the sources view');
sql(q{ALTER USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (ADD verify_token 'meaty ham&hock')});
@answer = call('GET', '/postgres/public/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meaty+ham%26hock');
is_deeply(\@answer, [ '200', 'text/plain; charset=utf-8', '1158201444' ],
	'meta: the subscription handshake is answered with hub.challenge (the token percent-decoded)');
@answer = call('GET', '/postgres/public/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meaty');
is("$answer[0] $answer[2]", "403 the verify token does not match\n", 'meta: another token: 403');
@answer = call('GET', '/postgres/public/meta?hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meaty+ham%26hock');
is($answer[0], '400', 'meta: another hub.mode: 400');
@answer = call('GET', '/postgres/public/meta?hub.mode=subscribe&hub.challenge=1&hub.challenge=2&hub.verify_token=meaty+ham%26hock');
is($answer[0], '400', 'meta: a parameter given twice: 400');
@answer = call('GET', '/postgres/public/meta?hub.mode=subscribe&hub.verify_token=meaty+ham%26hock');
is($answer[0], '400', 'meta: no challenge: 400');
my $wa = '{"object": "whatsapp_business_account", "entry": []}';
is(post('/postgres/public/meta', $wa, 'X-Hub-Signature-256: sha256=' . hmac_sha256_hex($wa, $secret)),
	'200 1 row', 'meta: a signed notification is a row');
is(post('/postgres/public/meta', $wa, 'X-Hub-Signature-256: sha256=' . hmac_sha256_hex($wa, 'guess')),
	'403 the request\'s meta signature does not match', 'meta: a wrong app secret: 403');

# GET elsewhere
@answer = call('GET', '/postgres/public/open?hub.mode=subscribe&hub.challenge=1&hub.verify_token=x');
is("$answer[0] $answer[2]", "405 only POST is allowed\n", 'a GET with a query to a table of another scheme: 405');
like(join(' ', run_command([ 'curl', '-s', '-i', "$base/postgres/public/open?hub.mode=subscribe" ])),
	qr/^Allow: POST\r?$/mi, 'with Allow: POST');
@answer = call('GET', '/postgres/public/meta');
is($answer[0], '405', 'a GET without a query: 405');
my @open = call('GET', '/postgres/public/open?hub.mode=subscribe&hub.challenge=1&hub.verify_token=x');
is_deeply([ call('GET', '/postgres/public/nothing?hub.mode=subscribe&hub.challenge=1&hub.verify_token=x') ],
	\@open, 'a GET to no table: the same 405, so that it tells nothing of which tables there are');
is_deeply([ call('GET', '/postgres/public/gh?hub.mode=subscribe&hub.challenge=1&hub.verify_token=x') ],
	\@open, 'nor of the signed ones');
is_deeply([ call('GET', '/nosuchdb/public/meta?hub.mode=subscribe&hub.challenge=1&hub.verify_token=x') ],
	\@open, 'nor of databases');

is(sql(q{SELECT (SELECT count(*) FROM slack) || ' ' || (SELECT count(*) FROM twitch) || ' ' ||
	(SELECT count(*) FROM zoom) || ' ' || (SELECT count(*) FROM meta)}), '1 3 1 1',
	'no handshake wrote a row');
my $log = slurp_file($node->logfile);
like($log, qr/LOG:  webhook source table "slack" answered a Slack url_verification handshake/,
	'the log tells of the Slack handshake');
like($log, qr/LOG:  webhook source table "zoom" answered a Zoom endpoint.url_validation handshake/,
	'of the Zoom one');
like($log, qr/LOG:  webhook source table "meta" answered a Meta subscribe handshake/, 'of the Meta one');
is(scalar(grep { /meaty/ && !/statement: ALTER USER MAPPING/ } split /\n/, $log), 0,
	'and never the verify token (but in the statement that set it)');

#
# 4. the same through the relay of another database
#
sql('CREATE DATABASE w1');
sql(qq{CREATE EXTENSION source_writes;
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret 's3', verify_token 'vt');
	CREATE FOREIGN TABLE zoom (event text) SERVER hooks OPTIONS (signature_scheme 'zoom');
	CREATE FOREIGN TABLE meta (object text) SERVER hooks OPTIONS (signature_scheme 'meta')}, 'w1');
ok($node->poll_query_until('w1', q{SELECT count(*) = 2 FROM source_writes.sources WHERE state = 'listening'}),
	'the sources of another database are served');
$now = time;
@answer = call('POST', '/w1/public/zoom', $val, zoom($now, $val, 's3'));
is_deeply(\@answer, [ '200', 'application/json',
	'{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"' . hmac_sha256_hex('qgg8vlvZRS6UYooatFL8Aw', 's3') . '"}' ],
	'zoom through a relay: the JSON answer');
@answer = call('GET', '/w1/public/meta?hub.mode=subscribe&hub.challenge=77&hub.verify_token=vt');
is_deeply(\@answer, [ '200', 'text/plain; charset=utf-8', '77' ], 'meta through a relay: the challenge');
is(sql(q{SELECT (SELECT count(*) FROM zoom) + (SELECT count(*) FROM meta)}, 'w1'), '0',
	'no row written there either');

done_testing();
