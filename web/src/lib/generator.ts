// The key generator's form rules (docs/spec.md "Key generation" rules 1-2, docs/protocol.md 11.19).

export const MASK_PLACEHOLDERS = ['*', '#', 'X'] as const;
export const DEFAULT_MASK = 'XXXXX-XXXXX-XXXXX-XXXXX-XXXXX';
/** Masks with fewer random characters are accepted by the server but weak (docs/protocol.md 11.19). */
export const MIN_RANDOM_CHARS = 8;
export const MAX_BATCH = 500;

export const CHARACTER_CLASSES = {
  upper: { label: 'Uppercase', chars: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ' },
  lower: { label: 'Lowercase', chars: 'abcdefghijklmnopqrstuvwxyz' },
  digits: { label: 'Numbers', chars: '0123456789' },
} as const;
export type CharacterClass = keyof typeof CHARACTER_CLASSES;
export type ClassChoice = Record<CharacterClass, boolean>;

/** The alphabet the request carries: the union of the chosen classes ('' when none is chosen). */
export function alphabetFor(choice: ClassChoice): string {
  return (Object.keys(CHARACTER_CLASSES) as CharacterClass[])
    .filter((c) => choice[c])
    .map((c) => CHARACTER_CLASSES[c].chars)
    .join('');
}

export function placeholderCount(mask: string): number {
  let n = 0;
  for (const ch of mask) if ((MASK_PLACEHOLDERS as readonly string[]).includes(ch)) n++;
  return n;
}

/** Problems the page reports before sending (the server checks everything again). */
export function generatorProblems(form: {
  mask: string;
  classes: ClassChoice;
  amount: number;
}): { field: string; msg: string }[] {
  const out: { field: string; msg: string }[] = [];
  if (alphabetFor(form.classes) === '') out.push({ field: 'alphabet', msg: 'Choose at least one character class.' });
  if (placeholderCount(form.mask) === 0) out.push({ field: 'mask', msg: 'The mask needs at least one *, # or X.' });
  if (!Number.isInteger(form.amount) || form.amount < 1 || form.amount > MAX_BATCH)
    out.push({ field: 'amount', msg: `Amount must be 1 to ${MAX_BATCH}.` });
  return out;
}

/** docs/protocol.md 11.19: warn (not refuse) below 8 random characters. */
export function weakMask(mask: string): boolean {
  const n = placeholderCount(mask);
  return n > 0 && n < MIN_RANDOM_CHARS;
}

/** Distinct keys a mask can produce with an alphabet of `alphabetSize` characters (Infinity when huge). */
export function keySpace(mask: string, alphabetSize: number): number {
  return alphabetSize ** placeholderCount(mask);
}

/**
 * A batch that takes more than 1 % of the mask's possible keys is asked about first: keys from a
 * space that small are easy to guess, and the application soon runs out of new ones.
 */
export const KEY_SPACE_SHARE = 0.01;

export function crowdedKeySpace(
  mask: string,
  alphabetSize: number,
  amount: number,
): { space: number; share: number } | null {
  const space = keySpace(mask, alphabetSize);
  if (placeholderCount(mask) === 0 || alphabetSize === 0 || amount <= space * KEY_SPACE_SHARE) return null;
  return { space, share: amount / space };
}
