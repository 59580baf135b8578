// docs/protocol.md 11.36: an application of another owner's tree does not exist for this tree. A route that
// names an application, or a record inside one (a key, an end user, a blacklist entry, a product), is
// answered 404 with that record's own not-found text before any check that could answer 403 (token
// scopes and app_ids, the two-factor policy, a reseller's permissions, manager-only routes): whether
// an id exists elsewhere cannot be probed by the 403/404 difference. What this decides is the
// account's own reach (its role's applications); an API token's app_ids narrow it afterwards (403,
// the app is of this tree) and record scoping inside the app (a reseller's subtree) stays with the
// services.
import { AppError, type ErrorCode } from '../../errors.js';

/** The records a dashboard path can name, each inside one application. */
type NamedKind = 'app' | 'license' | 'user' | 'ban' | 'product' | 'release';

/** First segment after /api (or unprefixed, docs/protocol.md 1) -> what the next segment names. */
const NAMED: readonly [RegExp, NamedKind, ErrorCode][] = [
  [/^(?:\/api)?\/apps\/([^/]+)(?:\/|$)/, 'app', 'app_not_found'],
  [/^(?:\/api)?\/licenses\/([^/]+)(?:\/|$)/, 'license', 'license_not_found'],
  [/^(?:\/api)?\/users\/([^/]+)(?:\/|$)/, 'user', 'user_not_found'],
  [/^(?:\/api)?\/bans\/([^/]+)(?:\/|$)/, 'ban', 'ban_not_found'],
  [/^(?:\/api)?\/products\/([^/]+)(?:\/|$)/, 'product', 'product_not_found'],
  [/^\/api\/releases\/([^/]+)(?:\/|$)/, 'release', 'release_not_found'],
];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface NamedRecord {
  readonly kind: NamedKind;
  readonly id: string;
  readonly notFound: ErrorCode;
}

/** The record a concrete dashboard path names, if any (ids are lower-cased; a malformed one is kept). */
export function namedRecord(path: string): NamedRecord | undefined {
  for (const [re, kind, notFound] of NAMED) {
    const m = re.exec(path);
    if (m) return { kind, id: m[1]!.toLowerCase(), notFound };
  }
  return undefined;
}

export interface RecordReach {
  /** The application a record belongs to; null when there is no such record. */
  appOf(kind: Exclude<NamedKind, 'app'>, id: string): Promise<string | null>;
  /** Whether the account (not narrowed by a token) reaches the application. */
  reaches(appId: string): Promise<boolean>;
}

/**
 * The application of the named record; throws the record's 404 when it does not exist or lies outside
 * the caller's applications.
 */
export async function assertReachable(named: NamedRecord, reach: RecordReach): Promise<string> {
  if (!UUID.test(named.id)) throw new AppError(named.notFound);
  const appId = named.kind === 'app' ? named.id : await reach.appOf(named.kind, named.id);
  if (appId === null || !(await reach.reaches(appId))) throw new AppError(named.notFound);
  return appId;
}
