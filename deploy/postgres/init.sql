-- Runs once, when the playground's database is created (docker-entrypoint-initdb.d), as `app`,
-- the owner. The relay's least-privilege role, as in docs/deployment.md: it may stream (LOGIN
-- REPLICATION), read and mark outbox rows, and delete old settled ones (retention pruning, on by
-- default; without DELETE run the relay with --no-prune), nothing else. The grants on the table
-- come from default privileges because `migrate` creates the table only later.
CREATE ROLE relay LOGIN REPLICATION PASSWORD 'relay';
GRANT USAGE ON SCHEMA public TO relay;
ALTER DEFAULT PRIVILEGES FOR ROLE app IN SCHEMA public GRANT SELECT, UPDATE, DELETE ON TABLES TO relay;
