// Times are shown in the browser's time zone; the exact UTC value is the hover title.

const DAY_MS = 86_400_000;
const UNIT_MS: Readonly<Record<string, number>> = {
  hours: 3_600_000,
  days: DAY_MS,
  weeks: 7 * DAY_MS,
  months: 30 * DAY_MS,
};

const local = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function localTime(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : local.format(d);
}

export function utcTitle(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime())
    ? iso
    : `${d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d{3}Z$/, '')} UTC`;
}

/**
 * docs/spec.md: activated time = expires_at minus duration value times unit. null for a key never
 * activated (no expires_at) or a lifetime key (its expiry says nothing about the activation).
 */
export function activatedAt(k: {
  expires_at?: string | null;
  duration_value?: number | null;
  duration_unit?: string | null;
}): string | null {
  if (!k.expires_at || !k.duration_unit || k.duration_unit === 'lifetime') return null;
  const unit = UNIT_MS[k.duration_unit];
  if (unit === undefined || typeof k.duration_value !== 'number') return null;
  const t = new Date(k.expires_at).getTime() - k.duration_value * unit;
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}

export function durationLabel(value: number | null | undefined, unit: string | null | undefined): string {
  if (unit === 'lifetime' || !unit) return 'Lifetime';
  const v = value ?? 0;
  return `${v} ${v === 1 ? unit.replace(/s$/, '') : unit}`;
}
