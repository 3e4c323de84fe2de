// Reads vitest's JSON report: fails when any test was skipped, todo or not run, or none ran,
// names each failed test, and prints the closing line 'N passed, N failed'.
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const all = report.testResults.flatMap((f) => f.assertionResults.map((t) => ({ file: f.name, ...t })));
const count = (s) => all.filter((t) => t.status === s).length;
const passed = count('passed');
const failed = count('failed');
const notRun = all.filter((t) => !['passed', 'failed'].includes(t.status));
const brokenFiles = report.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0);
const name = (t) => `${t.file.replace(process.cwd(), '.')} > ${t.fullName}`;
// Each failure's test and the first line of its message (.ci/run prints every report again at its end).
for (const t of all.filter((x) => x.status === 'failed'))
  console.error(`FAILED: ${name(t)}: ${String(t.failureMessages?.[0] ?? '').split('\n')[0].slice(0, 300)}`);
for (const t of notRun) console.error(`NOT RUN (${t.status}): ${name(t)}`);
for (const f of brokenFiles) console.error(`FILE FAILED TO RUN: ${f.name}: ${(f.message ?? '').slice(0, 500)}`);
console.log(`tests: ${passed} passed, ${failed} failed${notRun.length ? `, ${notRun.length} skipped` : ''}`);
if (all.length === 0) console.error('no test ran');
process.exit(failed > 0 || notRun.length > 0 || brokenFiles.length > 0 || all.length === 0 ? 1 : 0);
