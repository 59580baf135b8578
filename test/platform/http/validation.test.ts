// The edge's refusal of U+0000 (docs/protocol.md 11.18) wherever it hides in a body: in a field the schema
// knows, in one it leaves open, in a key, deep in arrays, as the very last value looked at; and the
// location it names.
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/errors.js';
import { compile } from '../../../src/platform/http/validation.js';

const body = compile(Type.Object({ name: Type.String(), tags: Type.Optional(Type.Array(Type.String())) }));

function locOf(value: unknown): unknown {
  try {
    body.parse(value);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    const issues = (err as ValidationError).issues;
    expect(issues[0]!.msg).toBe('Text must not contain the character U+0000');
    return issues[0]!.loc;
  }
  return undefined;
}

describe('compile().parse and U+0000', () => {
  it('passes bodies without it, however nested, and leaves nothing behind for the next call', () => {
    const deep: unknown[] = [];
    let at = deep;
    for (let i = 0; i < 5000; i++) at = (at[0] = []) as unknown[];
    expect(body.parse({ name: 'a', tags: ['x', 'y'], extra: { deep } })).toBeTruthy();
    expect(locOf({ name: 'ok', tags: ['\u0000'] })).toEqual(['body', 'tags', 0]);
    expect(body.parse({ name: 'clean again' })).toEqual({ name: 'clean again' });
  });

  it('finds it in a known field, an open field, a key, and as the last value looked at', () => {
    expect(locOf({ name: 'a\u0000' })).toEqual(['body', 'name']);
    expect(locOf({ name: 'a', extra: { inner: ['x', 'y\u0000z'] } })).toEqual(['body', 'extra', 'inner', 1]);
    expect(locOf({ name: 'a', ['k\u0000']: 1 })).toEqual(['body', 'k\u0000']);
    expect(locOf({ name: 'a', tags: ['\u0000', 'b', 'c'] })).toEqual(['body', 'tags', 0]);
    expect(locOf({ name: 'a', z: 'last\u0000' })).toEqual(['body', 'z']);
  });
});
