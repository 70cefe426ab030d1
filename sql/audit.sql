--
-- The audit trail.  The log names the role that made each edit, also when
-- a transaction changes roles (SET ROLE, SECURITY DEFINER functions); it
-- keeps the name the role had then, after the role is renamed or dropped;
-- and the batches of one transaction, one per role and source, share one
-- timestamp, while timestamps increase strictly from one transaction to
-- the next.
--
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE ROLE regress_audit_alice;
CREATE ROLE regress_audit_mallory;
GRANT USAGE ON FOREIGN SERVER kafka TO regress_audit_alice;
CREATE SCHEMA audit AUTHORIZATION regress_audit_alice;
GRANT USAGE ON SCHEMA audit TO regress_audit_mallory;

-- The log with each timestamp shown as its rank (1 = the first
-- transaction), and the bootstrap superuser, whose name varies, as such.
CREATE FUNCTION audit_log(src anyelement)
RETURNS TABLE (tx bigint, diff int, role text, data text)
LANGUAGE sql AS $$
  SELECT dense_rank() OVER (ORDER BY u.ts), u.diff,
         CASE WHEN u.role = (SELECT rolname FROM pg_roles WHERE oid = 10)
              THEN '(superuser)' ELSE u.role::text END,
         u.data::text
  FROM source_writes.updates(src) u
  ORDER BY 1, 2 DESC, 4
$$;

-- The batches of some sources the same way: one row per batch after batch
-- id "after", with its source and role.
CREATE FUNCTION audit_batches(after bigint, VARIADIC sources regclass[])
RETURNS TABLE (tx bigint, source text, role text)
LANGUAGE sql AS $$
  SELECT dense_rank() OVER (ORDER BY b.ts), b.source::regclass::text,
         CASE WHEN b.role::text = (SELECT rolname FROM pg_roles WHERE oid = 10)
              THEN '(superuser)' ELSE b.role::text END
  FROM source_writes.batches b
  WHERE b.source::regclass = ANY (sources) AND b.batch > after
  ORDER BY 1, 2, 3
$$;

--
-- alice owns a source, and a SECURITY DEFINER function that writes to it;
-- mallory may call the function and delete rows
--
SET ROLE regress_audit_alice;
CREATE FOREIGN TABLE audit.secret (id int, ssn text, note text)
  SERVER kafka OPTIONS (topic 'secret');
INSERT INTO audit.secret VALUES (1, '123-45-6789', 'n1'), (2, '987-65-4321', 'n2'),
                                (3, '555-55-5555', 'n3');
CREATE FUNCTION audit.add_note(text) RETURNS void
  LANGUAGE sql SECURITY DEFINER SET search_path = audit
  AS $$ INSERT INTO audit.secret VALUES (100, NULL, $1) $$;
REVOKE EXECUTE ON FUNCTION audit.add_note(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.add_note(text) TO regress_audit_mallory;
GRANT SELECT, DELETE ON audit.secret TO regress_audit_mallory;
RESET ROLE;

-- a transaction that inserts as alice, then deletes as mallory: the
-- insert is alice's, the retraction mallory's, at one timestamp
BEGIN;
SET ROLE regress_audit_alice;
INSERT INTO audit.secret VALUES (4, '444-44-4444', 'n4');
SET ROLE regress_audit_mallory;
DELETE FROM audit.secret WHERE id = 2;
COMMIT;
RESET ROLE;
SELECT * FROM audit_log(NULL::audit.secret);

-- mallory calls alice's SECURITY DEFINER function first, then deletes in
-- the same transaction: the function's insert is alice's, the delete
-- mallory's (it used to be logged as alice's, the first writer)
SET ROLE regress_audit_mallory;
BEGIN;
SELECT audit.add_note('hello');
DELETE FROM audit.secret WHERE id = 1;
COMMIT;
RESET ROLE;
SELECT * FROM audit_log(NULL::audit.secret) WHERE tx = 3;
-- and the batches say the same: one per role in each transaction
SELECT * FROM audit_batches(0, 'audit.secret');

-- a role that writes again after another keeps its one batch
BEGIN;
SET ROLE regress_audit_mallory;
DELETE FROM audit.secret WHERE id = 3;
SET ROLE regress_audit_alice;
INSERT INTO audit.secret VALUES (5, NULL, 'n5');
SET ROLE regress_audit_mallory;
DELETE FROM audit.secret WHERE id = 4;
COMMIT;
RESET ROLE;
SELECT * FROM audit_log(NULL::audit.secret) WHERE tx = 4;
SELECT * FROM audit_batches(0, 'audit.secret') WHERE tx = 4;

-- a role's edits rolled back to a savepoint leave no batch of that role
BEGIN;
SET ROLE regress_audit_alice;
INSERT INTO audit.secret VALUES (6, NULL, 'n6');
SAVEPOINT s;
SET ROLE regress_audit_mallory;
DELETE FROM audit.secret WHERE id = 5;
ROLLBACK TO SAVEPOINT s;
COMMIT;
RESET ROLE;
SELECT * FROM audit_log(NULL::audit.secret) WHERE tx = 5;
SELECT * FROM audit_batches(0, 'audit.secret') WHERE tx = 5;

--
-- the log keeps the name a role had when it wrote: after a rename, and
-- after DROP OWNED and DROP ROLE
--
CREATE FOREIGN TABLE notes (id int, note text) SERVER kafka OPTIONS (topic 'notes');
CREATE ROLE regress_audit_temp;
GRANT INSERT, DELETE, SELECT ON notes TO regress_audit_temp;
INSERT INTO notes VALUES (1, 'by the superuser');
SET ROLE regress_audit_temp;
INSERT INTO notes VALUES (2, 'by temp');
DELETE FROM notes WHERE id = 1;
RESET ROLE;
ALTER ROLE regress_audit_temp RENAME TO regress_audit_renamed;
SET ROLE regress_audit_renamed;
INSERT INTO notes VALUES (3, 'by renamed');
RESET ROLE;
SELECT * FROM audit_log(NULL::notes);
DROP OWNED BY regress_audit_renamed;
DROP ROLE regress_audit_renamed;
SELECT * FROM audit_log(NULL::notes);
SELECT * FROM audit_batches(0, 'notes');

--
-- timestamps: the batches of one transaction, over roles and sources,
-- share one; successive transactions, however quick, get strictly
-- increasing ones
--
CREATE FOREIGN TABLE stamps (id int) SERVER kafka OPTIONS (topic 'stamps');
GRANT INSERT ON stamps, notes TO regress_audit_alice, regress_audit_mallory;
INSERT INTO stamps VALUES (1);
SELECT max(batch) AS before_tx FROM source_writes.batches \gset
BEGIN;
INSERT INTO stamps VALUES (2);
SET ROLE regress_audit_alice;
INSERT INTO stamps VALUES (3);
INSERT INTO notes VALUES (10, 'alice, same transaction');
SET ROLE regress_audit_mallory;
INSERT INTO stamps VALUES (4);
RESET ROLE;
INSERT INTO notes VALUES (11, 'superuser, same transaction');
COMMIT;
-- five batches, three roles, two sources, one timestamp
SELECT count(*) AS batches, count(DISTINCT role) AS roles,
       count(DISTINCT source) AS sources, count(DISTINCT ts) AS timestamps
FROM source_writes.batches WHERE batch > :before_tx;
SELECT * FROM audit_batches(:before_tx, 'stamps', 'notes');
-- quick transactions, by turns as alice and mallory
SET ROLE regress_audit_alice;
INSERT INTO stamps VALUES (5);
SET ROLE regress_audit_mallory;
INSERT INTO stamps VALUES (6);
SET ROLE regress_audit_alice;
INSERT INTO stamps VALUES (7);
SET ROLE regress_audit_mallory;
INSERT INTO stamps VALUES (8);
RESET ROLE;
SELECT * FROM audit_log(NULL::stamps);
-- six transactions, six timestamps, in the order of the batches
SELECT count(DISTINCT ts) AS timestamps,
       count(*) FILTER (WHERE ts < previous) AS earlier_than_the_batch_before
FROM (SELECT ts, lag(ts) OVER (ORDER BY batch) AS previous
      FROM source_writes.batches WHERE source = 'stamps'::regclass) b;

DROP FOREIGN TABLE notes, stamps;
DROP FUNCTION audit.add_note(text);
DROP FOREIGN TABLE audit.secret;
DROP SCHEMA audit;
DROP FUNCTION audit_log(anyelement);
DROP FUNCTION audit_batches(bigint, regclass[]);
REVOKE ALL ON FOREIGN SERVER kafka FROM regress_audit_alice;
DROP ROLE regress_audit_alice, regress_audit_mallory;
DROP SERVER kafka;
SELECT count(*) AS batches_left FROM source_writes.batches;
