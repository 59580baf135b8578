#!/usr/bin/env node
// Points every citation of the old, out-of-repository contract at the pages that replace it in docs/:
//   PROTOCOL 12.5, PROTOCOL section 12, PROTOCOL§3   -> docs/protocol.md 12.5 (the numbered reference)
//   SPEC "Session alive", SPEC key generation rule 4 -> docs/spec.md "Session alive", docs/spec.md "Key generation" rule 4
//   STYLE 5, STYLE "The shape of the house"          -> docs/architecture.md "House practices" 5, ... "Dependency rules"
// In Markdown under docs/ (and the README, the SDKs' READMEs) the citations become links to the heading.
// Idempotent: a second run changes nothing, so it can be run again after merging branches that still
// carry old citations: `node scripts/cite-docs.mjs` (add `--check` to list what it would change and
// exit 1 instead). test/platform/docs-citations.test.ts keeps the result true.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// This script and the test that keeps its result name the old forms on purpose.
const SELF = ['scripts/cite-docs.mjs', 'test/platform/docs-citations.test.ts'];
const TEXT =
  /\.(ts|tsx|mts|js|mjs|cjs|py|cs|cpp|c|h|hpp|go|java|md|json|ya?ml|sh|html|css|txt)$|(^|\/)(run|Dockerfile)$/;

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Headings of a docs page: {number or title -> anchor}. */
function headings(file) {
  const map = new Map();
  for (const line of fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')) {
    const m = /^#{1,4} (.+?)\s*$/.exec(line);
    if (!m) continue;
    const text = m[1];
    map.set(text, slug(text));
    const num = /^(\d+(?:\.\d+)?)\.?\s+(.*)$/.exec(text);
    if (num) {
      map.set(num[1], slug(text));
      map.set(num[2], slug(text));
    }
  }
  return map;
}

// Unquoted ways the code names a section of the service reference: [pattern, heading, what follows it].
const SPEC_NAMED = [
  [/SPEC (?:reseller )?hiding rule(s?)/g, 'Reseller scoping and hiding', (s) => ` rule${s}`],
  [/SPEC key generation rule(s?)/g, 'Key generation', (s) => ` rule${s}`],
  [/SPEC key generation\b/g, 'Key generation', () => ''],
  [/SPEC Dashboard rule/g, 'Dashboard roles', () => ' rule'],
  [/SPEC (?:"Permission set" and )"Dashboard" rule/g, 'Permission set', () => ' and "Dashboard roles" rule'],
  [/SPEC team rule/g, 'Dashboard: team', () => ' rule'],
  [/SPEC heartbeat rules/g, 'Heartbeat rules', () => ''],
  [/SPEC Limits/g, 'Limits', () => ''],
  [/SPEC "stats"/g, 'Application', () => ''],
  [/SPEC "Resellers don't own apps"/g, 'Alert webhook', () => ' rule 3'],
  [/SPEC "Authentication" item/g, 'Client API', () => ' item'],
  [/SPEC "Authentication"/g, 'Client API', () => ''],
  [/SPEC rule ([1-6])\b/g, 'Key generation', (n) => ` rule ${n}`],
  [/SPEC rule ([78])\b/g, 'Dashboard: team', (n) => ` rule ${n}`],
];

/** The rewrite of one file's text; `md` says whether to write links, `rel` is the path to docs/ from it. */
export function rewrite(text, { md = false, rel = 'docs/', protocol = new Map(), spec = new Map() } = {}) {
  let out = text;
  const specRef = (name) => {
    const label = `docs/spec.md "${name}"`;
    return md && spec.has(name) ? `[${label}](${rel}spec.md#${spec.get(name)})` : label;
  };

  // The SDKs' skip reason from before the server served the licensing models (also matched by regexes).
  out = out.replace(/\bPROTOCOL 12 pending\b/g, 'licensing models pending');
  // PROTOCOL n.m (also with the file name and "section", "PROTOCOL sections 3-6", a number on the next comment line).
  out = out.replace(
    /\bPROTOCOL(?:\.md)?(\s+(?:(?:\/\/\/?|#|\*)\s*)?)(?:sections?\s+)?(?:§\s*)?(\d+(?:\.\d+)?)/g,
    (_m, space, num) => {
      const anchor = protocol.get(num);
      const label = `docs/protocol.md${space}${num}`;
      return md && anchor && !space.includes('\n') ? `[${label}](${rel}protocol.md#${anchor})` : label;
    },
  );

  // STYLE n[, m] and the one named section.
  out = out.replace(/\bSTYLE "The shape of the house"/g, () =>
    md
      ? `[docs/architecture.md "Dependency rules"](${rel}architecture.md#dependency-rules)`
      : 'docs/architecture.md "Dependency rules"',
  );
  out = out.replace(/\bSTYLE (\d+)/g, (_m, n) =>
    md
      ? `[docs/architecture.md "House practices"](${rel}architecture.md#house-practices) ${n}`
      : `docs/architecture.md "House practices" ${n}`,
  );

  // SPEC: the named forms, then the quoted headings, then the bare word.
  for (const [re, name, tail] of SPEC_NAMED) out = out.replace(re, (_m, g) => specRef(name) + tail(g ?? ''));
  out = out.replace(/\bSPEC:? "([^"\n]+)"/g, (_m, name) =>
    spec.has(name) ? specRef(name) : `docs/spec.md: "${name}"`,
  );
  const bare = md ? `[docs/spec.md](${rel}spec.md)` : 'docs/spec.md';
  out = out.replace(/\bSPEC's\b/g, `${bare}'s`);
  out = out.replace(/\bSPEC\b(?![_.])/g, bare);
  // The bare word in prose ("the decisions PROTOCOL leaves open"); a code constant named PROTOCOL stays.
  out = out.replace(/\bPROTOCOL's\b/g, "docs/protocol.md's");
  if (md) out = out.replace(/\bPROTOCOL\b(?![_.])/g, `[docs/protocol.md](${rel}protocol.md)`);
  return out;
}

const PRETTIER_DIRS = ['src/', 'test/', 'web/src/', 'sdk/typescript/', 'bench/', 'loadtest/'];
const PRETTIER_EXT = /\.(ts|tsx|mts|js|mjs|cjs|md|json|ya?ml|css|html)$/;
const MAX = 120; // prettier's printWidth, and test/platform/line-length.test.ts for src/
const length = (line) => [...line].length;
const COMMENT = /^(\s*(?:\/\/\/?|#|\*)\s?)(.*)$/;

/**
 * A citation is longer than what it replaces, so a comment line that fitted may not any more: its overflow
 * moves to the start of the next line of the same comment (or a new one), as far as it has to. Only lines
 * the rewrite made too long are touched; a one-line doc comment becomes a block first.
 */
export function rewrap(before, after) {
  const old = before.split('\n');
  const lines = after.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (length(lines[i]) <= MAX || old[i] === lines[i] || length(old[i] ?? '') > MAX) continue;
    const block = /^(\s*)\/\*\* (.*) \*\/$/.exec(lines[i]);
    if (block) {
      lines.splice(i, 1, `${block[1]}/**`, `${block[1]} * ${block[2]}`, `${block[1]} */`);
      old.splice(i, 1, '', '', '');
      i++;
    }
    for (let j = i; length(lines[j]) > MAX; j++) {
      const m = COMMENT.exec(lines[j]);
      if (!m || /^\s*\/\*/.test(lines[j])) break;
      const prefix = m[1];
      const cut = m[2].lastIndexOf(' ', MAX - length(prefix));
      if (cut <= 0) break;
      const tail = m[2].slice(cut + 1);
      lines[j] = prefix + m[2].slice(0, cut);
      const next = COMMENT.exec(lines[j + 1] ?? '');
      if (next && next[1] === prefix && next[2] !== '' && !/^(-|\d+\.|@|\*\/)/.test(next[2])) {
        lines[j + 1] = `${prefix}${tail} ${next[2]}`;
      } else {
        lines.splice(j + 1, 0, prefix + tail);
        old.splice(j + 1, 0, '');
      }
    }
  }
  return lines.join('\n');
}

function files() {
  const out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT });
  return out
    .toString('utf8')
    .split('\0')
    .filter((f) => f && TEXT.test(f) && !SELF.includes(f) && !f.includes('node_modules/') && f !== 'package-lock.json')
    .filter((f) => fs.existsSync(path.join(ROOT, f)));
}

function main() {
  const check = process.argv.includes('--check');
  const protocol = headings('docs/protocol.md');
  const spec = headings('docs/spec.md');
  const changed = [];
  for (const file of files()) {
    const full = path.join(ROOT, file);
    const text = fs.readFileSync(full, 'utf8');
    if (!/PROTOCOL|SPEC|STYLE/.test(text)) continue;
    const md = file.endsWith('.md');
    const rel = path.relative(path.dirname(full), path.join(ROOT, 'docs')) || '.';
    const cited = rewrite(text, { md, rel: `${rel.split(path.sep).join('/')}/`.replace(/^\.\//, ''), protocol, spec });
    const next = md || file.endsWith('.json') ? cited : rewrap(text, cited);
    if (next === text) continue;
    changed.push(file);
    if (!check) fs.writeFileSync(full, next);
  }
  for (const f of changed) console.log(`${check ? 'would rewrite' : 'rewrote'} ${f}`);
  // A longer citation can push a call past printWidth: let prettier lay out what it checks (`npm run lint`).
  const pretty = changed.filter((f) => PRETTIER_DIRS.some((d) => f.startsWith(d)) && PRETTIER_EXT.test(f));
  if (!check && pretty.length > 0) {
    execFileSync(path.join(ROOT, 'node_modules', '.bin', 'prettier'), ['--write', ...pretty], {
      cwd: ROOT,
      stdio: 'ignore',
    });
  }
  if (check && changed.length > 0) process.exit(1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
