/**
 * Debezium's topic rule, as its EventRouter applies it through Kafka Connect's RegexRouter:
 * `route.topic.regex` must match the whole routed-by value (Java's `Matcher.matches()`), and the
 * topic is then `route.topic.replacement` with Java's replacement syntax (`$1`, `${name}`, `\$`
 * for a literal); a value the regex does not match is the topic itself. Pure.
 */

/** A `route.topic.regex`, compiled; throws a message naming what JavaScript cannot read. */
export function compileJavaRegex(pattern: string): RegExp {
  // Anchored: Java's matches() needs the whole input. The 'u' flag makes JavaScript refuse what
  // it would otherwise read differently from Java (\Q…\E, \A, \z, possessive and atomic groups).
  try {
    return new RegExp(`^(?:${javaDots(pattern)})$`, 'u');
  } catch (e) {
    throw new Error(
      `route.topic.regex ${JSON.stringify(pattern)} cannot be used here: ${(e as Error).message}. Java-only syntax (\\Q…\\E, \\A, \\Z, possessive or atomic groups, inline flags) must be rewritten in the syntax both Java and JavaScript read`,
    );
  }
}

/**
 * Java's `.` matches anything but \n, \r, \u0085, \u2028 and \u2029; JavaScript's also matches
 * \u0085. Each unescaped `.` outside a character class is written out as Java's.
 */
function javaDots(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '\\') {
      out += c + (pattern[i + 1] ?? '');
      i++;
    } else if (inClass) {
      if (c === ']') inClass = false;
      out += c;
    } else if (c === '[') {
      inClass = true;
      out += c;
    } else out += c === '.' ? '[^\\n\\r\\u0085\\u2028\\u2029]' : c;
  }
  return out;
}

/** A replacement, parsed once: literal text and group references (by number or by name). */
export type Replacement = readonly (string | { group: number } | { name: string })[];

/**
 * Parses Java's replacement syntax (Matcher.appendReplacement): `\x` is x; `${name}` a named
 * group; `$` and digits a numbered group, taking as many digits as still name a group of
 * `regex`. Throws what Java would throw, at configuration time.
 */
export function parseJavaReplacement(replacement: string, regex: RegExp): Replacement {
  const groups = new RegExp(`${regex.source}|`, 'u').exec('')!.length - 1;
  const names = new Set(Object.keys(new RegExp(`${regex.source}|`, 'u').exec('')!.groups ?? {}));
  const parts: (string | { group: number } | { name: string })[] = [];
  let text = '';
  for (let i = 0; i < replacement.length; i++) {
    const c = replacement[i]!;
    if (c === '\\') {
      if (i + 1 >= replacement.length) throw new Error('character to be escaped is missing (a trailing \\)');
      text += replacement[++i];
    } else if (c === '$') {
      if (i + 1 >= replacement.length) throw new Error('illegal group reference: group index is missing');
      if (text) parts.push(text);
      text = '';
      if (replacement[i + 1] === '{') {
        const end = replacement.indexOf('}', i + 2);
        const name = end < 0 ? '' : replacement.slice(i + 2, end);
        if (!/^[A-Za-z][A-Za-z0-9]*$/.test(name))
          throw new Error(`named capturing group is missing a proper name in ${JSON.stringify(replacement)}`);
        if (!names.has(name)) throw new Error(`no group with name {${name}} in route.topic.regex`);
        parts.push({ name });
        i = end;
      } else {
        let n = Number.parseInt(replacement[i + 1] ?? '', 10);
        if (Number.isNaN(n) || !/[0-9]/.test(replacement[i + 1]!))
          throw new Error(`illegal group reference in ${JSON.stringify(replacement)}`);
        i++;
        if (n > groups) throw new Error(`no group ${n} in route.topic.regex`);
        // Java: keep taking digits while the number still names a group.
        while (i + 1 < replacement.length && /[0-9]/.test(replacement[i + 1]!)) {
          const next = n * 10 + Number(replacement[i + 1]);
          if (next > groups) break;
          n = next;
          i++;
        }
        parts.push({ group: n });
      }
    } else text += c;
  }
  if (text) parts.push(text);
  return parts;
}

/** RegexRouter's topic for `value`: the replacement when the regex matches all of it, else the value. */
export function javaReplaceWhole(value: string, regex: RegExp, replacement: Replacement): string {
  const m = regex.exec(value);
  if (!m) return value;
  let out = '';
  for (const p of replacement) {
    if (typeof p === 'string') out += p;
    // A group that took part in no match appends nothing (Java).
    else if ('group' in p) out += m[p.group] ?? '';
    else out += m.groups?.[p.name] ?? '';
  }
  return out;
}
