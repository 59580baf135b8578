// A HWID is compared lower-cased everywhere (docs/spec.md register/login/license): sessions, bans, devices,
// offline files, imports. This is the one place that says how.

/** The form a HWID is stored and compared in. */
export function normalizeHwid(hwid: string): string {
  return hwid.toLowerCase();
}
