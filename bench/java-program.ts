/** Running a bench's one-file Java program (KafkaFloor.java, RabbitFloor.java) on a class path of jars. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * java's arguments for `source` (a .java file) on the jars of `libs`: the class compiled once with
 * javac beside java (each run would otherwise compile the source in its JVM, seconds of CPU on
 * the shared cores, inside a measurement's warm-up), or the source file itself when there is no
 * javac.
 */
export function javaProgram(source: string, libs: string, java: string): string[] {
  const name = basename(source, '.java');
  const classes = fileURLToPath(new URL(`../.tmp/${name}-classes`, import.meta.url));
  const javac = join(dirname(java), 'javac');
  const compiled = join(classes, `${name}.class`);
  if (!existsSync(compiled) || statSync(compiled).mtimeMs < statSync(source).mtimeMs) {
    mkdirSync(classes, { recursive: true });
    const r = spawnSync(existsSync(javac) ? javac : 'javac', ['-d', classes, '-cp', join(libs, '*'), source]);
    if (r.status !== 0) return ['-cp', join(libs, '*'), source];
  }
  return ['-cp', `${join(libs, '*')}:${classes}`, name];
}
