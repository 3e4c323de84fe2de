// Every test process: the same warning filter as the CLI, so kafkajs' harmless
// TimeoutNegativeWarning does not bury the test output.
import { hideKafkajsTimeoutWarnings } from '../../src/sinks/kafka/kafkajs/warnings.ts';

hideKafkajsTimeoutWarnings();
