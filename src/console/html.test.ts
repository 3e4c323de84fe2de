import { describe, expect, it } from 'vitest';
import { escapeHtml, html, query, raw } from './html.ts';

describe('html', () => {
  it('escapes every interpolated value, including hostile row content', () => {
    const id = `"><script>alert(1)</script><img src=x onerror='y'>&`;
    const out = html`<td title="${id}">${id}</td>`.text;
    expect(out).not.toContain('<script>');
    expect(out).not.toContain(`"><`);
    expect(out).toBe(
      `<td title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;">&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;</td>`,
    );
  });

  it('nests html, joins arrays, drops null/undefined/false, keeps raw markup', () => {
    const rows = ['a<', 'b'].map((x) => html`<li>${x}</li>`);
    expect(html`<ul>${rows}</ul>${null}${undefined}${false}${0}${raw('<br>')}`.text).toBe(
      '<ul><li>a&lt;</li><li>b</li></ul>0<br>',
    );
    expect(escapeHtml(`'"`)).toBe('&#39;&quot;');
  });

  it('builds query strings without empty values', () => {
    expect(query({ status: ['failed', 'dead'], since: '', aggregate_id: 'a&b', x: undefined })).toBe(
      '?status=failed&status=dead&aggregate_id=a%26b',
    );
    expect(query({})).toBe('');
  });
});
