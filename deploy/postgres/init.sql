-- Runs once, when the playground's database is created (docker-entrypoint-initdb.d), as `app`,
-- the owner. The relay's least-privilege role, as in docs/deployment.md: it may stream (LOGIN
-- REPLICATION) and read and mark outbox rows, nothing else. The grants on the table come from
-- default privileges because `migrate` creates the table only later.
CREATE ROLE relay LOGIN REPLICATION PASSWORD 'relay';
GRANT USAGE ON SCHEMA public TO relay;
ALTER DEFAULT PRIVILEGES FOR ROLE app IN SCHEMA public GRANT SELECT, UPDATE ON TABLES TO relay;
