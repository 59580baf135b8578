// This machine's relay id (docs/air-gapped.md "The relay id"). A pool names the relay it was issued
// for, so a pool copied to a second machine does not double the seats. The id is derived from the
// systemd/D-Bus machine id: generated once at installation, kept across reboots, upgrades, address
// and hostname changes, and unique per installation. It is hashed with a fixed label so the relay
// never shows the raw machine id (which other software uses as a secret-ish identifier).
import fs from 'node:fs';
import { sha256Hex } from '../../../platform/crypto/index.js';

const SOURCES = ['/etc/machine-id', '/var/lib/dbus/machine-id'];
const LABEL = 'keywarden-relay-id-v1:';

export class RelayIdError extends Error {}

export function relayId(sources: readonly string[] = SOURCES): string {
  for (const file of sources) {
    let raw: string;
    try {
      raw = fs.readFileSync(file, 'utf8').trim().toLowerCase();
    } catch {
      continue;
    }
    if (/^[0-9a-f]{32}$/.test(raw)) return sha256Hex(`${LABEL}${raw}`).slice(0, 32);
  }
  throw new RelayIdError(
    `no machine id found (${sources.join(', ')}); ` +
      "run `systemd-machine-id-setup`, or mount the host's /etc/machine-id",
  );
}
