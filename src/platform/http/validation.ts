// Request validation with TypeBox: the same schemas validate requests (compiled once, fast on the
// hot path) and feed /api/openapi.json.
import { FormatRegistry, Type, type TSchema, type Static } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType } from '@sinclair/typebox/errors';
import { AppError, ValidationError, type ValidationIssue } from '../../errors.js';

/**
 * One line of plain text: no control or format character (Unicode Cc, Cf: zero-width characters and
 * bidirectional marks included) and no whitespace at either end. Identifiers a client computes
 * (a HWID) must be this, or two spellings that look alike would be two devices (docs/protocol.md 11.38).
 */
const PLAIN_LINE = /^(?!\s)(?!.*\s$)[^\p{Cc}\p{Cf}]*$/su;
FormatRegistry.Set('plain-line', (v) => PLAIN_LINE.test(v));

/** A string of `min` to `max` characters in the `plain-line` format. */
export function PlainLine(min: number, max: number) {
  return Type.String({ minLength: min, maxLength: max, format: 'plain-line' });
}

interface Validator<T extends TSchema> {
  readonly schema: T;
  /** Returns the value typed, or throws a 422 ValidationError with every issue. */
  parse(value: unknown, where?: 'body' | 'query'): Static<T>;
}

function snake(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

function issuesOf<T extends TSchema>(check: TypeCheck<T>, value: unknown, where: string): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const e of check.Errors(value)) {
    const loc: (string | number)[] = [where];
    for (const part of e.path.split('/').slice(1))
      loc.push(/^\d+$/.test(part) ? Number(part) : part.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (e.type === ValueErrorType.ObjectAdditionalProperties) {
      issues.push({ loc, msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
      continue;
    }
    if (e.type === ValueErrorType.StringFormat && e.schema.format === 'plain-line') {
      issues.push({
        loc,
        msg: 'Must not contain control or invisible characters, nor begin or end with whitespace',
        type: 'value_error',
      });
      continue;
    }
    issues.push({ loc, msg: e.message, type: snake(ValueErrorType[e.type] ?? 'value_error') });
    if (issues.length >= 20) break;
  }
  return issues;
}

/**
 * PostgreSQL text cannot hold U+0000, so text carrying it is refused at the edge for every route
 * (docs/protocol.md 11.18): it is never stored, never reaches a query, never becomes a 500.
 */
function nulIssue(value: unknown, where: string): ValidationIssue | undefined {
  // Iterative: fields a schema leaves open (client bodies ignore unknown fields) may nest thousands deep.
  const stack: { v: unknown; loc: (string | number)[] }[] = [{ v: value, loc: [where] }];
  while (stack.length > 0) {
    const { v, loc } = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes('\0')) return { loc, msg: 'Text must not contain the character U+0000', type: 'value_error' };
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push({ v: v[i], loc: [...loc, i] });
    } else if (typeof v === 'object' && v !== null) {
      for (const key in v) {
        if (key.includes('\0'))
          return { loc: [...loc, key], msg: 'Text must not contain the character U+0000', type: 'value_error' };
        stack.push({ v: (v as Record<string, unknown>)[key], loc: [...loc, key] });
      }
    }
  }
  return undefined;
}

/** Values still to look at (reused: the walk is synchronous, and every call leaves it empty). */
const pending: unknown[] = [];

/** Whether any string or key in `value` holds U+0000: the common answer (no) without building locations. */
function hasNul(value: unknown): boolean {
  let found = holdsNul(value);
  while (pending.length > 0 && !found) {
    const v = pending.pop() as object;
    if (Array.isArray(v)) for (let i = 0; i < v.length && !found; i++) found = holdsNul(v[i]);
    else {
      for (const key in v) {
        if (key.includes('\0') || holdsNul((v as Record<string, unknown>)[key])) found = true;
      }
    }
  }
  pending.length = 0;
  return found;
}

/** A string is looked at where it is found; an object or array waits in `pending`. */
function holdsNul(v: unknown): boolean {
  if (typeof v === 'string') return v.includes('\0');
  if (typeof v === 'object' && v !== null) pending.push(v);
  return false;
}

export function compile<T extends TSchema>(schema: T): Validator<T> {
  const check = TypeCompiler.Compile(schema);
  return {
    schema,
    parse(value, where = 'body') {
      if (!check.Check(value)) throw new ValidationError(issuesOf(check, value, where));
      const nul = hasNul(value) ? nulIssue(value, where) : undefined;
      if (nul) throw new ValidationError([nul]);
      return value;
    },
  };
}

/** Parses a JSON body: 400 `Malformed JSON body` when it is not JSON; an empty body reads as {}. */
export function parseJson(body: Buffer): unknown {
  if (body.byteLength === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new AppError('malformed_json');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A path id that is not a UUID cannot name anything: answer the route's 404, never a database error. */
export function pathId(value: string | undefined, notFound: ConstructorParameters<typeof AppError>[0]): string {
  if (!value || !UUID.test(value)) throw new AppError(notFound);
  return value.toLowerCase();
}
