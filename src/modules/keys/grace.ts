// docs/protocol.md 12.6: how long a program may keep running on a license while the service cannot be
// reached. Answers of license, login, register, trial, heartbeat/start and every accepted beat carry
// it when the application grants any grace.

/** now + grace_hours, or the license's expiry when that is earlier; undefined when the app grants none. */
function graceUntil(graceHours: number, expiresAt: Date | string | null, now: number): string | undefined {
  if (graceHours <= 0) return undefined;
  const until = now + graceHours * 3_600_000;
  const expiry = expiresAt === null ? null : new Date(expiresAt).getTime();
  return new Date(expiry !== null && expiry < until ? expiry : until).toISOString();
}

/** The answer's grace field: `{grace_until}` or nothing. */
export function graceField(graceHours: number, expiresAt: Date | string | null, now: number) {
  const until = graceUntil(graceHours, expiresAt, now);
  return until === undefined ? {} : { grace_until: until };
}
