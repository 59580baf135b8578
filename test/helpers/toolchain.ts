// The project's rule for tests that need a toolchain (python3-cryptography, mono, cmake...):
// missing and REQUIRE_SERVICES=1 (CI) -> fail loudly; missing elsewhere -> one warning line and a
// skip. Usage:
//   const hasMono = requireToolchain('mono (mono-complete)', spawnSync('mono', ['--version']).status === 0);
//   describe.skipIf(!hasMono)('C# SDK', () => { ... });
export function requireToolchain(name: string, available: boolean): boolean {
  if (available) return true;
  if (process.env.REQUIRE_SERVICES === '1') {
    throw new Error(`toolchain missing: ${name} (REQUIRE_SERVICES=1 forbids skipping; install it)`);
  }
  console.warn(`skipping: toolchain missing: ${name} (set REQUIRE_SERVICES=1 to make this a failure)`);
  return false;
}
