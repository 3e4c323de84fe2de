/** The driver's error code: a SQLSTATE (pg sets `code`), or a Node system error's (ECONNREFUSED). */
export function codeOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The SQLSTATE of a driver error, if it has one. */
export function sqlStateOf(e: unknown): string | undefined {
  const code = codeOf(e);
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** SQLSTATEs the relay treats specially (see PG_ERRORS). */
export const SqlState = {
  PROGRAM_LIMIT_EXCEEDED: '54000',
} as const;
