// Key generation (docs/spec.md "Key generation" rules 1-6, docs/protocol.md 11.7, 11.19): where new keys come from,
// what they cost a reseller, and the batch written with its charge in one transaction.
import { randomInt } from 'node:crypto';
import { validationError } from '../../errors.js';
import type { Principal } from '../access/index.js';
import { actorOf, keysPolicy, requirePermission } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { EventBus } from '../notify/index.js';
import type { AppsService } from '../apps/index.js';
import {
  KeySpaceExhausted,
  type BatchHooks,
  type KeyBatch,
  type LicenseRepository,
  type LicenseRow,
} from './license.repository.js';
import {
  ALPHABET_CLASSES,
  DEFAULT_ALPHABET,
  DEFAULT_MASK,
  ENUMERABLE_KEY_SPACE,
  durationDays,
  enumerateKeys,
  expandMask,
  keyPreview,
  keySpace,
  licenseHash,
  normalizeAlphabet,
  placeholderCount,
  pricePerKey,
} from './license-keys.js';
import type { GenerateInput } from './keys.requests.js';
import { readImport } from './keys.import.js';

const MAX_DURATION_DAYS = 3650;

function spaceExhausted(amount: number) {
  return validationError(
    'mask',
    `This mask and alphabet cannot produce ${amount} new keys for this application`,
    'value_error',
  );
}

interface KeyGeneratorDeps {
  apps: Pick<AppsService, 'visible' | 'entitlementCodes'>;
  licenses: LicenseRepository;
  audit: AuditRepository;
  events: EventBus;
  licenseHashKey: Buffer;
  now: () => number;
}

/** Entitlement codes of a key: each must be in the application's catalogue (422 on `entitlements`); sorted, once. */
export async function checkedCodes(
  apps: Pick<AppsService, 'entitlementCodes'>,
  appId: string,
  codes: readonly string[],
): Promise<string[]> {
  if (codes.length === 0) return [];
  const catalogue = await apps.entitlementCodes(appId);
  const i = codes.findIndex((c) => !catalogue.has(c));
  if (i >= 0)
    throw validationError(['entitlements', i], `Entitlement ${codes[i]} is not in the catalogue`, 'value_error');
  return [...new Set(codes)].sort();
}

export class KeyGenerator {
  constructor(private readonly d: KeyGeneratorDeps) {}

  /**
   * Where new keys come from (docs/protocol.md 11.19), decided before any work: random draws over a large key
   * space; over a small one, the exact list of keys the application does not have yet, shuffled,
   * so a mask that cannot yield `amount` new keys is refused at once instead of searched forever.
   */
  private async keySource(appId: string, mask: string, alphabet: string, amount: number) {
    const key = this.d.licenseHashKey;
    const entry = (plaintext: string) => ({
      plaintext,
      keyHash: licenseHash(key, plaintext),
      keyPreview: keyPreview(plaintext),
    });
    const space = keySpace(mask, alphabet.length);
    if (space < BigInt(amount)) throw spaceExhausted(amount);
    if (space > BigInt(ENUMERABLE_KEY_SPACE)) return () => entry(expandMask(mask, alphabet));
    const all = [...enumerateKeys(mask, alphabet)].map(entry);
    const taken = await this.d.licenses.existingHashes(
      appId,
      all.map((k) => k.keyHash),
    );
    const left = all.filter((k) => !taken.has(k.keyHash));
    if (left.length < amount) throw spaceExhausted(amount);
    for (let i = left.length - 1; i > 0; i--) {
      const j = randomInt(i + 1);
      [left[i], left[j]] = [left[j]!, left[i]!];
    }
    return () => left.pop() ?? null;
  }

  /** Draws `amount` new keys of `spec` and writes them in one batch (a generation's or an order's). */
  private async insertKeys(
    appId: string,
    spec: KeySpec,
    k: ReturnType<typeof settleKeySpec>,
    entitlements: readonly string[],
    amount: number,
    who: { resellerId: string | null; createdBy: string | null; charge: KeyBatch['charge'] },
    hooks?: BatchHooks,
  ): Promise<{ row: LicenseRow; key: string }[]> {
    const makeKey = await this.keySource(appId, k.mask, k.alphabet, amount);
    return this.d.licenses
      .insertBatch(
        {
          appId,
          level: spec.level ?? 1,
          durationValue: k.value,
          durationUnit: k.unit,
          durationDays: k.days,
          note: spec.note ?? '',
          ...who,
          maxSessions: spec.max_sessions ?? null,
          maxDevices: spec.max_devices ?? null,
          entitlements: JSON.stringify(entitlements),
        },
        amount,
        makeKey,
        new Date(this.d.now()),
        hooks,
      )
      .catch((err: unknown) => {
        if (err instanceof KeySpaceExhausted) throw spaceExhausted(amount);
        throw err;
      });
  }

  /** docs/spec.md "Key generation" rules 1-6; plaintext keys exist only in this return value. */
  async generateLicenses(
    p: Principal,
    appId: string,
    input: GenerateInput,
  ): Promise<{ row: LicenseRow; key: string }[]> {
    requirePermission(p, 'generate_keys');
    const app = await this.d.apps.visible(p, appId);
    const { unit, value, days, mask, alphabet } = settleKeySpec(input);
    const entitlements = await checkedCodes(this.d.apps, appId, input.entitlements ?? []);
    const resellerId = keysPolicy.attributedTo(p);
    const charge = keysPolicy.paysCredits(p)
      ? { accountId: p.account.id, amount: pricePerKey(days, app.keyCosts) * input.amount }
      : null;
    const created = await this.insertKeys(
      appId,
      input,
      { unit, value, days, mask, alphabet },
      entitlements,
      input.amount,
      {
        resellerId,
        createdBy: p.account.id,
        charge,
      },
    );
    if (charge) await this.d.events.publishAccount('account.credits', charge.accountId, { change: -charge.amount });
    await this.d.events.publish(
      'license.generate',
      appId,
      { count: created.length, license_ids: created.map((c) => c.row.id) },
      resellerId,
    );
    this.d.audit.write({
      appId,
      action: 'license.generate',
      actor: actorOf(p),
      resellerId: resellerId,
      detail:
        `${input.amount} keys generated (${unit === 'lifetime' ? 'lifetime' : `${value} ${unit}`}, ` +
        `level ${input.level ?? 1})${charge ? `, ${charge.amount} credits` : ''}`,
    });
    return created;
  }

  /**
   * Keys of an order (docs/protocol.md 14.5-14.7): no caller, nothing charged, `created_by` and `reseller_id`
   * null. `hooks.first` runs first in the keys' transaction (an order claims its event there, so a
   * repeat waits for it and then finds it), `hooks.last` after the keys are written.
   */
  async generateForOrder(
    appId: string,
    spec: KeySpec,
    amount: number,
    hooks: BatchHooks,
  ): Promise<{ row: LicenseRow; key: string }[]> {
    const { unit, value, days, mask, alphabet } = settleKeySpec(spec);
    // A paid order never fails over its product's codes: one removed from the catalogue since is left out.
    const catalogue = spec.entitlements?.length ? await this.d.apps.entitlementCodes(appId) : new Set<string>();
    const entitlements = [...new Set(spec.entitlements ?? [])].filter((c) => catalogue.has(c)).sort();
    const created = await this.insertKeys(
      appId,
      spec,
      { unit, value, days, mask, alphabet },
      entitlements,
      amount,
      { resellerId: null, createdBy: null, charge: null },
      hooks,
    );
    if (created.length === 0) return created;
    await this.d.events.publish(
      'license.generate',
      appId,
      { count: created.length, license_ids: created.map((c) => c.row.id) },
      null,
    );
    this.d.audit.write({
      appId,
      action: 'license.generate',
      resellerId: null,
      detail:
        `${amount} keys generated for an order (${unit === 'lifetime' ? 'lifetime' : `${value} ${unit}`}, ` +
        `level ${spec.level ?? 1})`,
    });
    return created;
  }

  /**
   * docs/protocol.md 15.6: imports existing keys. A key the application has (or an earlier row of the same
   * import) is skipped with its preview and the reason; `dryRun` reports the same without writing.
   */
  async importKeys(
    p: Principal,
    appId: string,
    format: 'list' | 'keyauth',
    rows: readonly unknown[],
    dryRun: boolean,
  ): Promise<{ imported: number; skipped: { key_preview: string; reason: string }[] }> {
    keysPolicy.assertImport(p);
    await this.d.apps.visible(p, appId);
    const keys = readImport(format, rows).map((k) => ({ ...k, keyHash: licenseHash(this.d.licenseHashKey, k.key) }));
    const existing = await this.d.licenses.existingHashes(
      appId,
      keys.map((k) => k.keyHash),
    );
    const skipped: { key_preview: string; reason: string }[] = [];
    const fresh: typeof keys = [];
    const seen = new Set<string>();
    for (const k of keys) {
      if (existing.has(k.keyHash)) skipped.push({ key_preview: k.preview, reason: 'already in the application' });
      else if (seen.has(k.keyHash)) skipped.push({ key_preview: k.preview, reason: 'repeated in the import' });
      else {
        seen.add(k.keyHash);
        fresh.push(k);
      }
    }
    if (dryRun || fresh.length === 0) return { imported: dryRun ? fresh.length : 0, skipped };
    const resellerId = keysPolicy.attributedTo(p);
    const inserted = await this.d.licenses.insertImported(
      appId,
      fresh,
      { createdBy: p.account.id, resellerId },
      new Date(this.d.now()),
    );
    // Added by someone else between the check and the insert: skipped as well.
    for (const k of fresh)
      if (!inserted.has(k.keyHash)) skipped.push({ key_preview: k.preview, reason: 'already in the application' });
    await this.d.events.publish('license.import', appId, { count: inserted.size }, resellerId);
    this.d.audit.write({
      appId,
      action: 'license.import',
      actor: actorOf(p),
      resellerId: resellerId,
      detail: `${inserted.size} keys imported (${format}), ${skipped.length} skipped`,
    });
    return { imported: inserted.size, skipped };
  }
}

/** The generation settings of a body or a product, without the amount. */
type KeySpec = Omit<GenerateInput, 'amount'>;

/**
 * Checks and completes generation settings (docs/spec.md "Key generation" rules, docs/protocol.md 11.19): the same
 * 422s for a generation body and for a product that will generate later.
 */
export function settleKeySpec(input: KeySpec) {
  const unit = input.unit ?? 'days';
  if (unit !== 'lifetime' && input.duration === undefined)
    throw validationError('duration', 'Duration is required unless the unit is lifetime', 'missing');
  const value = unit === 'lifetime' ? 0 : input.duration!;
  const days = durationDays(value, unit);
  if (days > MAX_DURATION_DAYS)
    throw validationError('duration', `Duration must be at most ${MAX_DURATION_DAYS} days`, 'less_than_equal');
  const mask = input.mask ?? DEFAULT_MASK;
  if (placeholderCount(mask) === 0)
    throw validationError('mask', 'Mask needs at least one placeholder (*, # or X)', 'value_error');
  const alphabet = normalizeAlphabet(input.alphabet ?? DEFAULT_ALPHABET);
  if (!ALPHABET_CLASSES.test(alphabet)) {
    throw validationError(
      'alphabet',
      'Alphabet must be letters and digits from the Uppercase, Lowercase and Numbers classes',
      'value_error',
    );
  }
  return { unit, value, days, mask, alphabet };
}
