// Reseller key prices (docs/spec.md "Key generation" rules 3-5, docs/protocol.md 11.6-11.7), as the server computes
// them: the page shows the price before sending and refuses a batch the balance cannot pay.

export const KEY_COST_TIERS = ['days:1', 'days:7', 'days:30', 'days:90', 'days:180', 'days:365', 'lifetime'] as const;
export type KeyCostTier = (typeof KEY_COST_TIERS)[number];
/** A blank tier is absent (or null as PATCH clears it). */
export type KeyCosts = Partial<Record<KeyCostTier, number | null>>;
export type DurationUnit = 'hours' | 'days' | 'weeks' | 'months' | 'lifetime';

/** Rule 3: hours round up to at least one day, weeks are 7 days, months 30; 0 means lifetime. */
export function durationDays(value: number, unit: DurationUnit): number {
  switch (unit) {
    case 'lifetime':
      return 0;
    case 'hours':
      return Math.max(1, Math.ceil(value / 24));
    case 'days':
      return value;
    case 'weeks':
      return value * 7;
    case 'months':
      return value * 30;
  }
}

const tier = (costs: KeyCosts, t: KeyCostTier): number | undefined => {
  const v = costs[t];
  return typeof v === 'number' ? v : undefined;
};

/**
 * Rule 4: `key_costs[days:N]` when that exact tier exists; `key_costs[lifetime]` for lifetime;
 * otherwise max(1, ceil(days / 30 * key_costs[days:30])) when days:30 is set and above zero; else 1.
 */
export function pricePerKey(days: number, costs: KeyCosts): number {
  if (days === 0) {
    const lifetime = tier(costs, 'lifetime');
    if (lifetime !== undefined) return lifetime;
  } else {
    const exact = (KEY_COST_TIERS as readonly string[]).includes(`days:${days}`)
      ? tier(costs, `days:${days}` as KeyCostTier)
      : undefined;
    if (exact !== undefined) return exact;
  }
  const monthly = tier(costs, 'days:30');
  if (monthly !== undefined && monthly > 0) return Math.max(1, Math.ceil((days / 30) * monthly));
  return 1;
}

export interface Quote {
  days: number;
  perKey: number;
  total: number;
  /** null: unlimited credits. */
  balance: number | null;
  /** Rule 5: the total exceeds the balance, so the page does not send the request. */
  refused: boolean;
}

export function quote(input: {
  amount: number;
  duration: number;
  unit: DurationUnit;
  costs: KeyCosts;
  balance: number | null;
}): Quote {
  const days = durationDays(input.duration, input.unit);
  const perKey = pricePerKey(days, input.costs);
  const total = perKey * input.amount;
  return { days, perKey, total, balance: input.balance, refused: input.balance !== null && total > input.balance };
}
