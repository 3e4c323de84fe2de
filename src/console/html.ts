/**
 * HTML building with escaping by default: every value interpolated into `html\`…\`` is escaped
 * unless it is itself the result of `html` (or `raw`, for markup the console generated, such as
 * an SVG chart). A row's columns (aggregate ids, errors, payloads) are hostile input: they only
 * ever reach a page through here.
 */
export class SafeHtml {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Value = SafeHtml | string | number | bigint | boolean | null | undefined | readonly Value[];

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof SafeHtml) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new SafeHtml(out);
}

/** Markup the console built itself (never row content). */
export function raw(text: string): SafeHtml {
  return new SafeHtml(text);
}

/** A query string from pairs; empty values are left out. */
export function query(params: Record<string, string | readonly string[] | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    for (const x of Array.isArray(v) ? v : [v]) if (x !== undefined && x !== '') q.append(k, x as string);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
