// How a shop proves a fulfilment webhook is its own (docs/protocol.md 14.5, 14.6). Pure functions: the raw
// body bytes as received, the product's secret, the time now. Every comparison is constant-time.
import { constantTimeEqual, hmacSha256, hmacSha512 } from '../../platform/crypto/index.js';

/** Stripe's tolerance between the signed timestamp and now, either way. */
const STRIPE_TOLERANCE_S = 300;

const HEX = /^[0-9a-f]+$/i;

/**
 * `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]`, as Stripe documents it: the signed
 * payload is `t + "." + raw body`, HMAC-SHA256 under the endpoint secret (its text, as UTF-8); any
 * `v1` may match (Stripe sends several while a secret is being rolled); other schemes are ignored.
 */
export function verifyStripeSignature(
  header: string | undefined,
  raw: Buffer,
  secret: string,
  nowSeconds: number,
): boolean {
  if (!header || header.length > 4096) return false;
  let t: string | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === 't') t = v;
    else if (k === 'v1') v1.push(v.toLowerCase());
  }
  if (t === undefined || !/^\d{1,12}$/.test(t) || v1.length === 0) return false;
  if (Math.abs(nowSeconds - Number(t)) > STRIPE_TOLERANCE_S) return false;
  const expected = hmacSha256(secret, Buffer.concat([Buffer.from(`${t}.`, 'utf8'), raw])).toString('hex');
  let ok = false;
  // Every candidate is compared (no early exit), so the time does not tell which one matched.
  for (const candidate of v1) if (HEX.test(candidate) && constantTimeEqual(candidate, expected)) ok = true;
  return ok;
}

/** `X-Keywarden-Fulfil-Signature: hex(HMAC-SHA512(key = secret, raw body))` (docs/protocol.md 14.6). */
export function verifyFulfilSignature(header: string | undefined, raw: Buffer, secret: string): boolean {
  if (!header) return false;
  const given = header.trim().toLowerCase();
  if (!HEX.test(given)) return false;
  return constantTimeEqual(given, hmacSha512(secret, raw).toString('hex'));
}
