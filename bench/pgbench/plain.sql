-- The payment transaction of server.BenchmarkPaymentOverhead without the
-- middleware: debit a balance, insert a payment row.
\set acct random(0, 999)
BEGIN;
UPDATE accounts SET balance = balance - 1 WHERE id = :acct;
INSERT INTO payments (account_id, amount) VALUES (:acct, 1) RETURNING id;
COMMIT;
