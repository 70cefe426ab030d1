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
CREATE FUNCTION test_signature(tab regclass, body bytea, headers jsonb)
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

-- the door's own checks
SELECT test_signature('github', 'x', '[]');
SELECT test_signature('github', 'x', '{"X-Hub-Signature-256": 1}');
SELECT test_signature('pg_class', 'x', '{}');

RESET search_path;
DROP USER MAPPING FOR CURRENT_USER SERVER sig_hooks;
DROP SCHEMA sig CASCADE;
DROP SERVER sig_hooks CASCADE;
DROP FUNCTION test_signature(regclass, bytea, jsonb);
DROP EXTENSION pgcrypto;
