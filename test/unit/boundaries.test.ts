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

/** Folder -> folders it must never import (STYLE "The shape of the house": dependencies point inward). */
const FOLDER_RULES: Record<string, string[]> = {
  services: ['http', 'ws'],
  db: ['services', 'actors', 'cluster', 'http', 'ws'],
  cluster: ['services', 'actors', 'db', 'http', 'ws'],
  actors: ['services', 'http', 'ws'],
};

/** Top-level folders under src/ that a file imports through relative paths. */
function importedFolders(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.[^']+)'/g)) {
    const target = path.relative(src, path.resolve(path.dirname(file), m[1]!));
    if (!target.startsWith('..')) out.push(target.split(path.sep)[0]!);
  }
  return out;
}

describe('folder boundaries', () => {
  for (const [folder, forbidden] of Object.entries(FOLDER_RULES)) {
    it(`src/${folder} imports none of ${forbidden.join(', ')}`, () => {
      const offenders = files(path.join(src, folder)).flatMap((f) =>
        importedFolders(f).filter((t) => forbidden.includes(t)).map((t) => `${path.relative(src, f)} -> ${t}`));
      expect(offenders).toEqual([]);
    });
  }

  it('SQL runs only in src/db (repositories); everything else calls their methods', () => {
    const runsSql = /\bsql\.(all|one|run|transaction)\s*[<(]/;
    const offenders = files(src).filter((f) => !path.relative(src, f).startsWith(`db${path.sep}`) && runsSql.test(fs.readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(src, f))).toEqual([]);
  });

  it('the rule finds a violation when there is one (self-check)', () => {
    const probe = path.join(src, 'db', '__probe__.ts');
    fs.writeFileSync(probe, "import { x } from '../services/apps.service.js';\n");
    try {
      expect(importedFolders(probe)).toEqual(['services']);
    } finally {
      fs.rmSync(probe);
    }
  });
});

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
