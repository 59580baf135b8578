import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.js';

describe('error catalogue', () => {
  const readme = fs.readFileSync(path.resolve(import.meta.dirname, '../../README.md'), 'utf8');
  it.each(Object.entries(ERRORS))('%s is documented in the README with its status', (_code, { status, detail }) => {
    expect(readme).toContain(`| ${status} | \`${detail}\` |`);
  });
});
