// SemVer 2.0.0 (semver.org): the official pattern, and precedence as its section 11 orders it
// (build metadata ignored; a pre-release sorts below its release; identifiers compared numerically
// when both are numbers, numbers below words, a longer list above its prefix).

const IDENT = '(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)';
const SEMVER = new RegExp(
  '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)' +
    `(?:-(${IDENT}(?:\\.${IDENT})*))?` +
    '(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$',
);

interface SemVer {
  core: [bigint, bigint, bigint];
  pre: string[];
}

export function parseSemVer(v: string): SemVer | null {
  const m = v.length <= 255 ? SEMVER.exec(v) : null;
  if (!m) return null;
  return { core: [BigInt(m[1]!), BigInt(m[2]!), BigInt(m[3]!)], pre: m[4] ? m[4].split('.') : [] };
}

const NUMERIC = /^\d+$/;

function compareIdentifier(a: string, b: string): number {
  const an = NUMERIC.test(a);
  const bn = NUMERIC.test(b);
  if (an && bn) return BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;
  if (an !== bn) return an ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Negative when a precedes b, positive when it follows, 0 when equal in precedence. */
export function compareSemVer(a: SemVer, b: SemVer): number {
  for (let i = 0; i < 3; i++) if (a.core[i] !== b.core[i]) return a.core[i]! < b.core[i]! ? -1 : 1;
  if (a.pre.length === 0 || b.pre.length === 0) return b.pre.length - a.pre.length;
  for (let i = 0; i < Math.min(a.pre.length, b.pre.length); i++) {
    const c = compareIdentifier(a.pre[i]!, b.pre[i]!);
    if (c !== 0) return c;
  }
  return a.pre.length - b.pre.length;
}
