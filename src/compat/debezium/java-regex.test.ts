import { describe, expect, it } from 'vitest';
import { compileJavaRegex, javaReplaceWhole, parseJavaReplacement } from './java-regex.ts';

const topic = (value: string, regex: string, replacement: string) => {
  const re = compileJavaRegex(regex);
  return javaReplaceWhole(value, re, parseJavaReplacement(replacement, re));
};

describe('Debezium topic rule (RegexRouter with Java replacement syntax)', () => {
  it("Debezium's default replacement (outbox.event. and the routedByValue group)", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Java's syntax.
    expect(topic('Order', '(?<routedByValue>.*)', 'outbox.event.${routedByValue}')).toBe(
      'outbox.event.Order',
    );
  });

  it('numbered groups, and Java taking as many digits as still name a group', () => {
    expect(topic('Order', '(?<routedByValue>.*)', 'x.$1')).toBe('x.Order');
    // Only one group: $10 is group 1 followed by "0".
    expect(topic('Order', '(.*)', 'x.$10')).toBe('x.Order0');
    const ten = '(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)';
    expect(topic('abcdefghij', ten, '$10-$1')).toBe('j-a');
    expect(topic('abc', '(a)(b)?(x)?c', '[$3]')).toBe('[]');
  });

  it('\\ escapes the next character; $0 is the whole match', () => {
    expect(topic('Order', '(.*)', '\\$1-\\\\-$0')).toBe('$1-\\-Order');
  });

  it('a value the regex does not match in full is the topic itself (Matcher.matches)', () => {
    expect(topic('Order.v2', 'Order', 'orders')).toBe('Order.v2');
    expect(topic('Order', 'Order', 'orders')).toBe('orders');
    expect(topic('customer_42', 'customer_(\\d+)', 'c.$1')).toBe('c.42');
  });

  it("Java's dot: not \\u0085 (JavaScript's matches it)", () => {
    expect(topic('a\u0085b', '(.*)', 'x')).toBe('a\u0085b');
    expect(topic('a.b', '([.]*)|(a\\.b)', 'y')).toBe('y');
  });

  it('refuses what Java would refuse, at configuration time', () => {
    const re = compileJavaRegex('(?<routedByValue>.*)');
    expect(() => parseJavaReplacement('x.$2', re)).toThrow(/no group 2/);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Java's syntax.
    expect(() => parseJavaReplacement('x.${other}', re)).toThrow(/no group with name/);
    expect(() => parseJavaReplacement('x.$', re)).toThrow(/group index is missing/);
    expect(() => parseJavaReplacement('x\\', re)).toThrow(/trailing/);
    expect(() => parseJavaReplacement('x.$a', re)).toThrow(/illegal group reference/);
  });

  it('refuses Java-only regex syntax instead of reading it differently', () => {
    expect(() => compileJavaRegex('\\Qa.b\\E')).toThrow(/route.topic.regex/);
    expect(() => compileJavaRegex('a*+')).toThrow(/route.topic.regex/);
    expect(() => compileJavaRegex('(?>a)')).toThrow(/route.topic.regex/);
  });
});
