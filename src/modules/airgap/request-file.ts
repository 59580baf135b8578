// An air-gapped machine's activation request (docs/air-gapped.md "Activation by file"):
//   REQ = "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?, "nonce", "created_at"})
// written by an SDK with no network. Whatever does not parse as that is a 422 on `request`.
import { validationError } from '../../errors.js';

const PREFIX = 'kwreq1.';
const B64URL = /^[A-Za-z0-9_-]+$/;
/** Printable and single-line, as the client API's `license` takes a key (1-256) and a HWID (8-256). */
const PLAIN = /^[^\u0000-\u001f\u007f]{1,256}$/;
const HWID = /^[^\u0000-\u001f\u007f]{8,256}$/;

interface ActivationRequest {
  appId: string;
  key: string;
  hwid: string;
  nonce: string;
}

function refuse(msg: string) {
  return validationError('request', msg, 'value_error');
}

function object(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function parseActivationRequest(text: string): ActivationRequest {
  const t = text.trim();
  if (!t.startsWith(PREFIX) || !B64URL.test(t.slice(PREFIX.length)))
    throw refuse('Not an activation request (kwreq1.)');
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(t.slice(PREFIX.length), 'base64url').toString('utf8'));
  } catch {
    throw refuse('Not an activation request (kwreq1.)');
  }
  if (!object(body) || body.v !== 1) throw refuse('Unsupported activation request version');
  const { app_id, key, hwid, nonce, created_at, components } = body;
  if (typeof app_id !== 'string' || !PLAIN.test(app_id)) throw refuse('The request names no application');
  if (typeof key !== 'string' || !PLAIN.test(key)) throw refuse('The request carries no license key');
  if (typeof hwid !== 'string' || !HWID.test(hwid)) throw refuse('The request HWID must be 8-256 printable characters');
  if (typeof nonce !== 'string' || !B64URL.test(nonce) || Buffer.from(nonce, 'base64url').length !== 16)
    throw refuse('The request nonce must be 16 bytes, base64url');
  if (typeof created_at !== 'string' || Number.isNaN(Date.parse(created_at)))
    throw refuse('The request has no valid created_at');
  if (components !== undefined && !object(components)) throw refuse('The request components must be an object');
  return { appId: app_id, key, hwid, nonce };
}
