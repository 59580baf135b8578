import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.js';

describe('error catalogue', () => {
  const page = fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/errors.md'), 'utf8');
  it.each(Object.entries(ERRORS))('%s is documented in docs/errors.md with its status', (_code, { status, detail }) => {
    expect(page).toContain(`| ${status} | \`${detail}\` |`);
  });
});
