// Every test process: the same warning filter as the CLI, so kafkajs' harmless
// TimeoutNegativeWarning does not bury the test output.
import { hideKafkajsTimeoutWarnings } from '../../src/sinks/kafka/kafkajs/warnings.ts';

hideKafkajsTimeoutWarnings();

// A run on another PostgreSQL major (OUTBOX_TEST_PG_VERSION): the clusters tests start of their own
// (startThrowawayPostgres without a version, the CLI's demo) are of that major too.
const pgVersion = process.env.OUTBOX_TEST_PG_VERSION?.trim();
if (pgVersion) process.env.OUTBOX_PG_VERSION = pgVersion;
