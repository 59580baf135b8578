// The expand/contract rule of rolling upgrades (docs/deploy.md#upgrades): while pods of version N and
// N+1 share one database, a migration of N+1 may only add what N ignores (tables, nullable columns,
// columns with a default, indexes, constraints N's writes satisfy). What N still uses is removed or
// tightened later, in a migration named ...Contract, once no released version reads or writes it.
// This test reads every migration's SQL and holds it to that rule.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/platform/db/migrations/index.js';

const dir = path.resolve(import.meta.dirname, '../../src/platform/db/migrations');

/** Written before the rule, each shipped with the code that needed it (docs/deploy.md says which). */
const BEFORE_THE_RULE = new Set(['Migration20261121000000Initial', 'Migration20261122000000HostileInput']);

/** Statements that break version N while it still runs against the database. */
const CONTRACT: [RegExp, string][] = [
  [/\bdrop\s+(table|column)\b/i, 'drops what the previous version still reads'],
  [/\brename\s+(to|column)\b/i, 'renames what the previous version still uses'],
  [/\bset\s+not\s+null\b/i, "tightens a column the previous version's writes may leave null"],
  [/\balter\s+column\s+"?\w+"?\s+(set\s+data\s+)?type\b/i, 'changes a type under the previous version'],
  [
    /\badd\s+column\s+"?\w+"?\s+[\w() ]+?\s+not\s+null(?![^,;]*\bdefault\b)/i,
    "adds a required column the previous version's inserts leave out",
  ],
];

/** The SQL of a migration's up(), the part a rolling upgrade runs. */
function upSql(name: string): string {
  const src = fs.readFileSync(path.join(dir, `${name}.ts`), 'utf8');
  const up = /async\s+up\s*\(\)[^{]*\{([\s\S]*?)\n {2}\}/.exec(src);
  if (!up) throw new Error(`${name}: no up() found`);
  return up[1]!;
}

function contractSteps(sql: string): string[] {
  return CONTRACT.filter(([re]) => re.test(sql)).map(([, why]) => why);
}

describe('migrations follow expand/contract', () => {
  it('the rule catches each kind of contract step, and passes pure expansions', () => {
    expect(contractSteps(`alter table "a" drop column "b";`)).toHaveLength(1);
    expect(contractSteps(`alter table "a" rename column "b" to "c";`)).toHaveLength(1);
    expect(contractSteps(`alter table "a" alter column "b" set not null;`)).toHaveLength(1);
    expect(contractSteps(`alter table "a" alter column "b" type text using ("b"::text);`)).toHaveLength(1);
    expect(contractSteps(`alter table "a" add column "b" int not null;`)).toHaveLength(1);
    expect(contractSteps(`alter table "a" add column "b" int not null default 0, add column "c" text null;`)).toEqual(
      [],
    );
    expect(contractSteps(`create table "x" ("id" uuid not null, primary key ("id"));`)).toEqual([]);
  });

  it('every migration since the rule only expands, unless it is a ...Contract migration', () => {
    expect(MIGRATIONS.length).toBeGreaterThan(BEFORE_THE_RULE.size);
    const broken: string[] = [];
    for (const { name } of MIGRATIONS) {
      if (BEFORE_THE_RULE.has(name) || /Contract$/.test(name)) continue;
      const why = contractSteps(upSql(name));
      if (why.length > 0) broken.push(`${name}: ${why.join('; ')}`);
    }
    expect(broken).toEqual([]);
    // the exemptions are real: each of them does contract
    expect(contractSteps(upSql('Migration20261122000000HostileInput')).length).toBeGreaterThan(0);
  });
});
