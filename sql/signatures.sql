--
-- Signature schemes: a scheme's verdict on a request (its body and
-- headers), as the webhook worker checks it, through the tests' door
-- test_signature().  The answers the worker gives for each verdict are in
-- the TAP tests (030_webhook_server and on).
--
-- The expected signatures are never our own output.  They are computed
-- here by pgcrypto's hmac() (OpenSSL's HMAC), and pgcrypto is checked
-- against GitHub's documented test vector: secret "It's a Secret to
-- Everybody", body "Hello, World!", X-Hub-Signature-256
-- sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17,
-- which is also what
--   printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
-- prints; in base64 (the same with -binary | base64):
--   dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=
--
CREATE EXTENSION pgcrypto;
CREATE FUNCTION test_signature(tab regclass, body bytea, headers jsonb,
                               now timestamptz DEFAULT NULL)
RETURNS text AS 'source_writes_test', 'source_writes_test_signature' LANGUAGE C;

CREATE SERVER sig_hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
CREATE USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (secret 'It''s a Secret to Everybody');
CREATE SCHEMA sig;
SET search_path = sig, public;

-- the signature, as the sender computes it, of a body with a secret
CREATE FUNCTION signed(body text, encoding text,
                       secret text DEFAULT 'It''s a Secret to Everybody')
RETURNS text LANGUAGE sql
AS $$ SELECT encode(hmac(convert_to(body, 'UTF8'), convert_to(secret, 'UTF8'), 'sha256'), encoding) $$;

-- pgcrypto gives the documented vector, in hex and base64
SELECT signed('Hello, World!', 'hex') =
       '757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17' AS hex_as_documented,
       signed('Hello, World!', 'base64') =
       'dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=' AS base64_as_documented;

-- hex after a prefix (as GitHub signs), hex alone, base64 (as Shopify
-- signs), and a table that checks no signature
CREATE FOREIGN TABLE github (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_header 'X-Hub-Signature-256', signature_prefix 'sha256=');
CREATE FOREIGN TABLE plain_hex (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_header 'X-Signature');
CREATE FOREIGN TABLE b64 (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_header 'X-Shopify-Hmac-Sha256', signature_encoding 'base64');
CREATE FOREIGN TABLE unsigned_t (doc jsonb) SERVER sig_hooks;

-- valid: the documented vector itself, and signatures of other bodies;
-- header names in any case, hex digits in either case
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('github', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('x-hub-signature-256', 'sha256=' || signed('{"id": 1}', 'hex')));
SELECT test_signature('plain_hex', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('X-Signature', signed('{"id": 1}', 'hex')));
SELECT test_signature('plain_hex', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('X-Signature', upper(signed('{"id": 1}', 'hex'))));
SELECT test_signature('b64', 'Hello, World!',
  '{"X-Shopify-Hmac-Sha256": "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc="}');
SELECT test_signature('b64', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('X-Shopify-Hmac-Sha256', signed('{"id": 1}', 'base64')));

-- the prefix: without it, or where the table wants none
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('plain_hex', 'Hello, World!',
  '{"X-Signature": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');

-- wrong signatures: of another body, one digit changed, cut short, not
-- hex, in the other encoding, not base64, empty
SELECT test_signature('github', 'Hello, World?',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18"}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e"}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043eXY"}');
SELECT test_signature('plain_hex', 'Hello, World!',
  '{"X-Signature": "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc="}');
SELECT test_signature('b64', 'Hello, World!',
  '{"X-Shopify-Hmac-Sha256": "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('b64', 'Hello, World!',
  '{"X-Shopify-Hmac-Sha256": "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc"}');
SELECT test_signature('b64', 'Hello, World!', '{"X-Shopify-Hmac-Sha256": "!!!!"}');
SELECT test_signature('plain_hex', 'Hello, World!', '{"X-Signature": ""}');

-- the header missing, or another one
SELECT test_signature('github', 'Hello, World!', '{}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Signature": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');

-- a table that checks no signature
SELECT test_signature('unsigned_t', 'Hello, World!', '{}');

-- an empty body (openssl dgst as above, of printf '')
SELECT signed('', 'hex') =
       '66a0c074deaa0f489ead6537e0d32f9a344b90bbeda705b6ed45ecd3b413fb40' AS hex_as_openssl,
       signed('', 'base64') =
       'ZqDAdN6qD0ierWU34NMvmjRLkLvtpwW27UXs07QT+0A=' AS base64_as_openssl;
SELECT test_signature('github', '',
  jsonb_build_object('X-Hub-Signature-256', 'sha256=' || signed('', 'hex')));
SELECT test_signature('b64', '',
  jsonb_build_object('X-Shopify-Hmac-Sha256', signed('', 'base64')));
SELECT test_signature('github', '',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');

-- a wrong secret: what the sender signed no longer matches, what it signs
-- with the new secret does
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'another secret');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');
SELECT test_signature('b64', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('X-Shopify-Hmac-Sha256', signed('{"id": 1}', 'base64')));
SELECT test_signature('b64', convert_to('{"id": 1}', 'UTF8'),
  jsonb_build_object('X-Shopify-Hmac-Sha256', signed('{"id": 1}', 'base64', 'another secret')));

-- no secret: an error, but only once the signature is read (a missing
-- header or prefix is told first)
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks OPTIONS (DROP secret);
SELECT test_signature('github', 'Hello, World!', '{}');
SELECT test_signature('github', 'Hello, World!', '{"X-Hub-Signature-256": "abc"}');
SELECT test_signature('github', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}');

--
-- Named schemes (signature_scheme), each signed as its provider documents
-- it, with a fixed clock for the replay window.  Documented vectors,
-- checked here with pgcrypto and also by openssl:
--  * Standard Webhooks / Svix ("Verifying payloads manually"): secret
--    whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id msg_p5jXN8AQM9LWM0D4loKWxJek,
--    timestamp 1614265330, body {"test": 2432232314}, signature
--    v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
--  * Slack ("Verifying requests from Slack"): secret
--    8f742231b10e8888abcd99yyyzzz85a5, timestamp 1531420618, the slash
--    command body below, v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503
-- The others (Stripe, Twitch, Paddle, Segment) publish no vector: their
-- signatures are pgcrypto's HMAC of the string each documents.
--
CREATE FUNCTION mac(msg text, key bytea, enc text DEFAULT 'hex', alg text DEFAULT 'sha256')
RETURNS text LANGUAGE sql
AS $$ SELECT encode(hmac(convert_to(msg, 'UTF8'), key, alg), enc) $$;
CREATE FUNCTION k(secret text) RETURNS bytea LANGUAGE sql
AS $$ SELECT convert_to(secret, 'UTF8') $$;
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (ADD secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');

-- invalid combinations, with a hint listing the schemes
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'svix');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'hmac');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'token');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'stripe', signature_header 'Stripe-Signature');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'github', signature_prefix 'sha256=');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'github', signature_tolerance '1 min');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_header 'X-Signature', signature_tolerance '1 min');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'stripe', signature_tolerance 'soon');
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'stripe', signature_tolerance '-1 min');
CREATE FOREIGN TABLE hmac_named (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'hmac', signature_header 'X-Signature');
ALTER FOREIGN TABLE hmac_named OPTIONS (SET signature_scheme 'slack');
ALTER FOREIGN TABLE hmac_named OPTIONS (SET signature_scheme 'nope');
DROP FOREIGN TABLE hmac_named;

-- a whsec_ secret that is not base64 is refused; its value is not shown
CREATE USER MAPPING FOR PUBLIC SERVER sig_hooks OPTIONS (secret 'whsec_not base64!');
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (ADD previous_secret 'whsec_@@@@');

-- standard: the documented vector, and the svix- header names
CREATE FOREIGN TABLE standard (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'standard');
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT mac('msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}',
           decode('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64'), 'base64')
       = 'g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=' AS standard_as_documented;
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp": "1614265330",
    "svix-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
-- several signatures, one of them right; other versions ignored
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,Zm9v v1a,bar v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
-- tampered body, another id, expired and future (default 5 min), tolerance
SELECT test_signature('standard', convert_to('{"test": 2432232315}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_other", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330 + 300)) AS at_5_min,
  test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330 + 301)) AS expired,
  test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330 - 301)) AS future;
ALTER FOREIGN TABLE standard OPTIONS (ADD signature_tolerance '1 hour');
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330 + 3600)) AS at_1_hour;
-- malformed: no id, a timestamp that is not a number, no v1, repeated
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330.0",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": ["v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1,Zm9v"]}',
  to_timestamp(1614265330));
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'), '{}',
  to_timestamp(1614265330));
-- rotation: the documented secret as the previous one, a new current one
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'whsec_c2VjcmV0LW9mLXRoZS1uZXctZGF5',
           ADD previous_secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330)) AS previous_secret;
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  jsonb_build_object('webhook-id', 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    'webhook-timestamp', '1614265330', 'webhook-signature',
    'v1,' || mac('msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}',
                 decode('c2VjcmV0LW9mLXRoZS1uZXctZGF5', 'base64'), 'base64')),
  to_timestamp(1614265330)) AS current_secret;
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks OPTIONS (DROP previous_secret);
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330)) AS previous_dropped;
-- a secret that is not base64 (another scheme's, without whsec_) is no
-- key: the other one still is; with none, the check fails saying so
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', ADD previous_secret 'old-secret!');
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330)) AS other_previous;
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'not base64!', DROP previous_secret);
SELECT test_signature('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
  to_timestamp(1614265330)) AS no_key;

-- slack: the documented vector
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret '8f742231b10e8888abcd99yyyzzz85a5');
CREATE FOREIGN TABLE slack (body text) SERVER sig_hooks
  OPTIONS (signature_scheme 'slack', format 'text');
CREATE TABLE slack_body AS SELECT 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c'::text AS b;
SELECT mac('v0:1531420618:' || b, k('8f742231b10e8888abcd99yyyzzz85a5'))
       = 'a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503' AS slack_as_documented
  FROM slack_body;
SELECT test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420618",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618) + interval '5 min') AS valid,
  test_signature('slack', convert_to(b || 'x', 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420618",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618)) AS tampered,
  test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420619",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618)) AS other_timestamp,
  test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420618",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618) + interval '5 min 1 s') AS expired,
  test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420618",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618) - interval '5 min 1 s') AS future,
  test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "soon",
    "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618)) AS not_a_number,
  test_signature('slack', convert_to(b, 'UTF8'),
  '{"X-Slack-Request-Timestamp": "1531420618",
    "X-Slack-Signature": "a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}',
  to_timestamp(1531420618)) AS no_version
  FROM slack_body \gx

-- stripe: t=<ts>,v1=<hex> of "<ts>.<body>"; any v1 may match.  Stripe's
-- secrets begin with whsec_ too, but are the key as they are, not base64
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j');
CREATE FOREIGN TABLE stripe (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'stripe');
SELECT test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j'))),
  to_timestamp(1700000000)) AS valid,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('another secret')) || ',v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j')) || ',v0=abc'),
  to_timestamp(1700000000)) AS multi,
  test_signature('stripe', convert_to('{"id": "evt_2"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j'))),
  to_timestamp(1700000000)) AS tampered,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('another secret'))),
  to_timestamp(1700000000)) AS wrong_secret,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j'))),
  to_timestamp(1700000301)) AS expired,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j'))),
  to_timestamp(1699999699)) AS future,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  '{"Stripe-Signature": "v1=abc"}', to_timestamp(1700000000)) AS no_t,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  '{"Stripe-Signature": "t=17e8,v1=abc"}', to_timestamp(1700000000)) AS bad_t,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  '{"Stripe-Signature": "garbage"}', to_timestamp(1700000000)) AS garbage,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  '{"Stripe-Signature": ["t=1,v1=ab", "t=1,v1=ab"]}', to_timestamp(1)) AS repeated,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'), '{}',
  to_timestamp(1700000000)) AS missing \gx
-- rotation: the old secret as previous_secret
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'whsec_Nw0rT7yU2iO9pA4sD6fG8hJ1kL3zX5cV', ADD previous_secret 'whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j');
SELECT test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_5Ty8m3kZq1vXrW0aLp9bN2cD4eF6gH7j'))),
  to_timestamp(1700000000)) AS previous,
  test_signature('stripe', convert_to('{"id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' ||
    mac('1700000000.{"id": "evt_1"}', k('whsec_Nw0rT7yU2iO9pA4sD6fG8hJ1kL3zX5cV'))),
  to_timestamp(1700000000)) AS current;
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'shared secret', DROP previous_secret);

-- twitch: sha256=<hex> of id || timestamp (RFC 3339) || body; 10 min
CREATE FOREIGN TABLE twitch (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'twitch');
SELECT test_signature('twitch', convert_to('{"a": 1}', 'UTF8'),
  jsonb_build_object('Twitch-Eventsub-Message-Id', 'e76c6bd4',
    'Twitch-Eventsub-Message-Timestamp', '2019-11-16T10:11:12.634234626Z',
    'Twitch-Eventsub-Message-Signature', 'sha256=' ||
    mac('e76c6bd4' || '2019-11-16T10:11:12.634234626Z' || '{"a": 1}', k('shared secret'))),
  '2019-11-16 10:21:12+00') AS valid,
  test_signature('twitch', convert_to('{"a": 1}', 'UTF8'),
  jsonb_build_object('Twitch-Eventsub-Message-Id', 'e76c6bd4',
    'Twitch-Eventsub-Message-Timestamp', '2019-11-16T10:11:12.634234626Z',
    'Twitch-Eventsub-Message-Signature', 'sha256=' ||
    mac('e76c6bd4' || '2019-11-16T10:11:12.634234626Z' || '{"a": 1}', k('shared secret'))),
  '2019-11-16 10:21:13+00') AS expired,
  test_signature('twitch', convert_to('{"a": 1}', 'UTF8'),
  jsonb_build_object('Twitch-Eventsub-Message-Id', 'e76c6bd4',
    'Twitch-Eventsub-Message-Timestamp', '2019-11-16T12:11:12+02:00',
    'Twitch-Eventsub-Message-Signature', 'sha256=' ||
    mac('e76c6bd4' || '2019-11-16T12:11:12+02:00' || '{"a": 1}', k('shared secret'))),
  '2019-11-16 10:11:12+00') AS with_offset,
  test_signature('twitch', convert_to('{"a": 2}', 'UTF8'),
  jsonb_build_object('Twitch-Eventsub-Message-Id', 'e76c6bd4',
    'Twitch-Eventsub-Message-Timestamp', '2019-11-16T10:11:12.634234626Z',
    'Twitch-Eventsub-Message-Signature', 'sha256=' ||
    mac('e76c6bd4' || '2019-11-16T10:11:12.634234626Z' || '{"a": 1}', k('shared secret'))),
  '2019-11-16 10:11:12+00') AS tampered,
  test_signature('twitch', convert_to('{"a": 1}', 'UTF8'),
  jsonb_build_object('Twitch-Eventsub-Message-Id', 'e76c6bd4',
    'Twitch-Eventsub-Message-Timestamp', '1573899072',
    'Twitch-Eventsub-Message-Signature', 'sha256=00'),
  '2019-11-16 10:11:12+00') AS unix_timestamp \gx

-- paddle: ts=<ts>;h1=<hex> of "<ts>:<body>"; 5 s
CREATE FOREIGN TABLE paddle (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'paddle');
SELECT test_signature('paddle', convert_to('{"event_id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Paddle-Signature', 'ts=1671552777;h1=' ||
    mac('1671552777:{"event_id": "evt_1"}', k('shared secret'))),
  to_timestamp(1671552782)) AS valid,
  test_signature('paddle', convert_to('{"event_id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Paddle-Signature', 'ts=1671552777;h1=' ||
    mac('1671552777:{"event_id": "evt_1"}', k('shared secret'))),
  to_timestamp(1671552783)) AS expired,
  test_signature('paddle', convert_to('{"event_id": "evt_1"}', 'UTF8'),
  jsonb_build_object('Paddle-Signature', 'ts=1671552777;h1=00;h1=' ||
    mac('1671552777:{"event_id": "evt_1"}', k('shared secret'))),
  to_timestamp(1671552777)) AS multi,
  test_signature('paddle', convert_to('{"event_id": "evt_1"}', 'UTF8'),
  '{"Paddle-Signature": "ts=now;h1=00"}', to_timestamp(1671552777)) AS bad_ts \gx

-- github, shopify, segment (HMAC-SHA1), token
CREATE FOREIGN TABLE gh (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'github');
CREATE FOREIGN TABLE shop (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'shopify');
CREATE FOREIGN TABLE seg (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'segment');
CREATE FOREIGN TABLE tok (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'token', signature_header 'Authorization');
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'It''s a Secret to Everybody');
SELECT test_signature('gh', 'Hello, World!',
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}') AS github,
  test_signature('shop', 'Hello, World!',
  '{"X-Shopify-Hmac-Sha256": "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc="}') AS shopify,
  test_signature('seg', 'Hello, World!',
  jsonb_build_object('X-Signature', mac('Hello, World!', k('It''s a Secret to Everybody'), 'hex', 'sha1'))) AS segment,
  test_signature('seg', 'Hello, World!',
  '{"X-Signature": "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}') AS segment_sha256,
  test_signature('gh', 'Hello, World!',
  '{"X-Hub-Signature-256": ["sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "sha256=00"]}') AS repeated \gx
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'Bearer s3cr3t', ADD previous_secret 'Bearer old');
SELECT test_signature('tok', 'x', '{"Authorization": "Bearer s3cr3t"}') AS current,
  test_signature('tok', 'x', '{"Authorization": "Bearer old"}') AS previous,
  test_signature('tok', 'x', '{"Authorization": "Bearer s3cr3"}') AS shorter,
  test_signature('tok', 'x', '{"Authorization": "bearer s3cr3t"}') AS other_case,
  test_signature('tok', 'x', '{}') AS missing \gx

-- meta (GitHub's header, the app secret) and zoom (v0:<ts>:<body> in
-- x-zm-signature, as Zoom's "Verify webhook events" builds it)
CREATE FOREIGN TABLE meta (doc jsonb) SERVER sig_hooks OPTIONS (signature_scheme 'meta');
CREATE FOREIGN TABLE zoom (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'zoom', signature_tolerance '1 min');
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks
  OPTIONS (SET secret 'app secret', DROP previous_secret);
SELECT test_signature('meta', '{"object": "page"}',
  jsonb_build_object('X-Hub-Signature-256', 'sha256=' || mac('{"object": "page"}', k('app secret')))) AS meta,
  test_signature('meta', '{"object": "page"}',
  jsonb_build_object('X-Hub-Signature-256', 'sha256=' || mac('{"object": "pagE"}', k('app secret')))) AS meta_tampered,
  test_signature('zoom', '{"event": "meeting.started"}',
  jsonb_build_object('x-zm-request-timestamp', '1658940994',
    'x-zm-signature', 'v0=' || mac('v0:1658940994:{"event": "meeting.started"}', k('app secret'))),
  to_timestamp(1658940994 + 60)) AS zoom,
  test_signature('zoom', '{"event": "meeting.started"}',
  jsonb_build_object('x-zm-request-timestamp', '1658940994',
    'x-zm-signature', 'v0=' || mac('v0:1658940994:{"event": "meeting.started"}', k('app secret'))),
  to_timestamp(1658940994 + 61)) AS zoom_expired,
  test_signature('zoom', '{"event": "meeting.started"}',
  jsonb_build_object('x-zm-request-timestamp', '1658940994',
    'x-zm-signature', 'v0=' || mac('v0:1658940994:{"event": "meeting.started"}', k('other'))),
  to_timestamp(1658940994)) AS zoom_wrong_secret \gx
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (signature_scheme 'meta', signature_tolerance '1 min');

-- idempotency keys come from one place; a verify token is not empty
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks
  OPTIONS (idempotency_header 'Idempotency-Key', idempotency_field 'id');
ALTER FOREIGN TABLE meta OPTIONS (ADD idempotency_field 'id');
ALTER FOREIGN TABLE meta OPTIONS (ADD idempotency_header 'X-Id');
ALTER FOREIGN TABLE meta OPTIONS (DROP idempotency_field);
CREATE FOREIGN TABLE bad (doc jsonb) SERVER sig_hooks OPTIONS (idempotency_field '');
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks OPTIONS (ADD verify_token '');
ALTER USER MAPPING FOR CURRENT_USER SERVER sig_hooks OPTIONS (ADD verify_token 'meaty');

-- the door's own checks
SELECT test_signature('github', 'x', '[]');
SELECT test_signature('github', 'x', '{"X-Hub-Signature-256": 1}');
SELECT test_signature('pg_class', 'x', '{}');

RESET search_path;
DROP USER MAPPING FOR CURRENT_USER SERVER sig_hooks;
DROP SCHEMA sig CASCADE;
DROP SERVER sig_hooks CASCADE;
DROP FUNCTION test_signature(regclass, bytea, jsonb, timestamptz);
DROP EXTENSION pgcrypto;
