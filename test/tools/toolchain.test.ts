// The missing-toolchain rule every SDK test uses: skip with one line, or fail under REQUIRE_SERVICES=1.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { requireToolchain } from '../helpers/toolchain.js';

const saved = process.env.REQUIRE_SERVICES;
afterEach(() => {
  if (saved === undefined) delete process.env.REQUIRE_SERVICES;
  else process.env.REQUIRE_SERVICES = saved;
  vi.restoreAllMocks();
});

describe('requireToolchain', () => {
  it('passes an available toolchain silently', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    process.env.REQUIRE_SERVICES = '1';
    expect(requireToolchain('mono', true)).toBe(true);
    expect(warn).not.toHaveBeenCalled();
  });

  it('skips a missing one with exactly one warning line', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    delete process.env.REQUIRE_SERVICES;
    expect(requireToolchain('mono', false)).toBe(false);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toMatch(/^skipping: toolchain missing: mono/);
  });

  it('fails a missing one under REQUIRE_SERVICES=1', () => {
    process.env.REQUIRE_SERVICES = '1';
    expect(() => requireToolchain('cmake', false)).toThrow(/toolchain missing: cmake/);
  });
});
