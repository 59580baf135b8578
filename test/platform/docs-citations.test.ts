// The contract lives in the repository: code and docs cite docs/protocol.md (numbered sections),
// docs/spec.md and docs/architecture.md (headings), never a file a clone does not have. Each check runs
// over every file git knows (tracked and untracked, not ignored) and is first proven on planted input.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const TEXT =
  /\.(ts|tsx|mts|js|mjs|cjs|py|cs|cpp|c|h|hpp|go|java|md|json|ya?ml|sh|html|css|txt|toml)$|(^|\/)(run|Dockerfile)$/;
// Built from parts so that this file does not name them itself.
const FORBIDDEN = ['..' + '/shared', ...['PROTOCOL', 'SPEC', 'STYLE'].map((n) => `${n}.md`)];
// This file and the rewriting script name the old forms on purpose (planted input, patterns).
const SELF = ['test/platform/docs-citations.test.ts', 'scripts/cite-docs.mjs'];
type Page = 'protocol' | 'spec' | 'architecture';

/** GitHub's anchor of a heading (what a `page.md#anchor` link needs). */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

interface Headings {
  titles: Set<string>; // heading texts, and for "12.5 Offline license files" also "Offline license files"
  numbers: Set<string>; // "12", "12.5"
  anchors: Set<string>;
}

function headings(markdown: string): Headings {
  const h: Headings = { titles: new Set(), numbers: new Set(), anchors: new Set() };
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.+?)\s*$/.exec(line);
    if (!m) continue;
    const text = m[1]!;
    h.titles.add(text);
    h.anchors.add(slug(text));
    const num = /^(\d+(?:\.\d+)?)\.?\s+(.*)$/.exec(text);
    if (num) {
      h.numbers.add(num[1]!);
      h.titles.add(num[2]!);
    }
  }
  return h;
}

const NUMBERS = String.raw`\d+(?:\.\d+)?(?:(?:\s*[-,/]\s*|\s+and\s+)\d+(?:\.\d+)?)*`;
const NUMBERED = new RegExp(String.raw`docs/protocol\.md(?:\s+(?:(?://|#|\*)\s*)?)(${NUMBERS})`, 'g');
const QUOTED = /docs\/(protocol|spec|architecture)\.md"?\]?(?:\([^)]*\))? "([^"\n]+)"/g;
const LINK = /\b(protocol|spec|architecture)\.md#([\w-]+)/g;

/** Every problem in `files` (path -> text) given the three pages' headings: `path: what`. */
function problems(files: Map<string, string>, pages: Record<Page, Headings>): string[] {
  const out: string[] = [];
  for (const [file, text] of files) {
    for (const f of FORBIDDEN) if (text.includes(f)) out.push(`${file}: refers to ${f}`);
    for (const m of text.matchAll(NUMBERED)) {
      for (const n of m[1]!.split(/\s*[-,/]\s*|\s+and\s+/)) {
        if (!pages.protocol.numbers.has(n)) out.push(`${file}: docs/protocol.md ${n} is no heading`);
      }
    }
    for (const m of text.matchAll(QUOTED)) {
      if (!pages[m[1] as Page].titles.has(m[2]!)) out.push(`${file}: docs/${m[1]}.md "${m[2]}" is no heading`);
    }
    for (const m of text.matchAll(LINK)) {
      if (!pages[m[1] as Page].anchors.has(m[2]!)) out.push(`${file}: ${m[1]}.md#${m[2]} is no heading`);
    }
  }
  return out;
}

function repositoryFiles(): Map<string, string> {
  const list = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root });
  const files = new Map<string, string>();
  for (const file of list.toString('utf8').split('\0')) {
    if (!file || !TEXT.test(file) || file.includes('node_modules/') || SELF.includes(file)) continue;
    if (file === 'package-lock.json' || !fs.existsSync(path.join(root, file))) continue;
    files.set(file, fs.readFileSync(path.join(root, file), 'utf8'));
  }
  return files;
}

const realPages = (): Record<Page, Headings> => ({
  protocol: headings(fs.readFileSync(path.join(root, 'docs/protocol.md'), 'utf8')),
  spec: headings(fs.readFileSync(path.join(root, 'docs/spec.md'), 'utf8')),
  architecture: headings(fs.readFileSync(path.join(root, 'docs/architecture.md'), 'utf8')),
});

describe('the contract is in the repository (docs/protocol.md, docs/spec.md, docs/architecture.md)', () => {
  it('finds planted problems, and passes good citations (self-check)', () => {
    const pages: Record<Page, Headings> = {
      protocol: headings('# P\n## 12. Models\n### 12.5 Offline license files\n### 11.3 Limits\n```\n## 99. No\n```\n'),
      spec: headings('# S\n### Session alive\n'),
      architecture: headings('## House practices\n'),
    };
    const planted = new Map([
      ['a.ts', `// see ${'..'}/shared/x\n`],
      ['b.ts', `// ${'PROTOCOL'}.md section 2\n`],
      ['c.md', `[x](${'SPEC'}.md)\n`],
      ['d.ts', '// docs/protocol.md 12.9: no such item\n'],
      ['e.ts', '// docs/protocol.md 12.5-12.7 and 11.3\n'],
      ['f.ts', '// docs/spec.md "Session dead"\n'],
      ['g.md', '[docs/protocol.md 12.5](protocol.md#125-offline-licence-files)\n'],
      ['h.ts', '// docs/protocol.md 99 (a heading inside a code block is none)\n'],
    ]);
    expect(problems(planted, pages)).toEqual([
      'a.ts: refers to ../shared',
      'b.ts: refers to PROTOCOL.md',
      'c.md: refers to SPEC.md',
      'd.ts: docs/protocol.md 12.9 is no heading',
      'e.ts: docs/protocol.md 12.7 is no heading',
      'f.ts: docs/spec.md "Session dead" is no heading',
      'g.md: protocol.md#125-offline-licence-files is no heading',
      'h.ts: docs/protocol.md 99 is no heading',
    ]);
    const good = new Map([
      ['a.ts', '// docs/protocol.md 12.5, 11.3 and 12; docs/spec.md "Session alive"\n'],
      [
        'b.md',
        '[docs/protocol.md 12.5](protocol.md#125-offline-license-files), [docs/spec.md "Session alive"](spec.md#session-alive)\n',
      ],
      ['c.ts', '// docs/architecture.md "House practices" 5\n'],
      ['d.go', '// the grace period (docs/protocol.md\n// 12.5) covers now\n'],
    ]);
    expect(problems(good, pages)).toEqual([]);
  });

  it('no file refers to the old contract files, and every cited section and anchor is a heading', () => {
    expect(problems(repositoryFiles(), realPages())).toEqual([]);
  });

  it('no citation of the old form is left (scripts/cite-docs.mjs --check)', () => {
    // Exit status 1 and the files it would rewrite when one is left; execFileSync throws on that.
    const out = execFileSync(process.execPath, ['scripts/cite-docs.mjs', '--check'], { cwd: root, encoding: 'utf8' });
    expect(out).toBe('');
  });

  it('docs/protocol.md numbers its 18 sections and the items code cites', () => {
    const { numbers } = realPages().protocol;
    for (let n = 1; n <= 18; n++) expect(numbers.has(String(n)), `section ${n}`).toBe(true);
    for (let m = 1; m <= 40; m++) expect(numbers.has(`11.${m}`), `item 11.${m}`).toBe(true);
  });
});
