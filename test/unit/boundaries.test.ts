// The dependency rules of STYLE.md, enforced: each native or infrastructure package is imported
// only by the folder that owns it.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const src = path.resolve(import.meta.dirname, '../../src');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const RULES: [RegExp, string[]][] = [
  [/from '(uWebSockets\.js)'|require\('uWebSockets\.js'\)/, ['http', 'ws']],
  [/from '@mikro-orm\/(postgresql|knex|migrations)'/, ['db']],
  [/from 'sodium-native'/, ['crypto', 'types']],
  [/from 'ioredis'/, ['cluster']],
];

describe('import boundaries', () => {
  for (const [pattern, owners] of RULES) {
    it(`${pattern.source} is imported only under src/{${owners.join(',')}}`, () => {
      const offenders = files(src).filter((f) => {
        const top = path.relative(src, f).split(path.sep)[0]!;
        return !owners.includes(top) && pattern.test(fs.readFileSync(f, 'utf8'));
      });
      expect(offenders.map((f) => path.relative(src, f))).toEqual([]);
    });
  }
});
