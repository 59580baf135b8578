// Counts in words: "1 credit", "2 credits", "1,296 keys" (digits grouped the same way everywhere).

const grouped = new Intl.NumberFormat('en-US');

export function formatCount(n: number): string {
  return grouped.format(n);
}

/** `n` and the noun in the right number; `plural` for nouns that do not just add an s. */
export function plural(n: number, singular: string, pluralForm = `${singular}s`): string {
  return `${formatCount(n)} ${n === 1 ? singular : pluralForm}`;
}
