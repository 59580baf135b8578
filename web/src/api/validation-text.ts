// A 422 in words a person understands. The server validates with TypeBox and answers each issue
// as {loc, msg, type}: `type` is the validator's error kind in snake case (`string_min_length`,
// `integer_minimum`, `union`...) and `msg` its English default ("Expected string length greater or
// equal to 1"), which names types rather than what to type. Messages the server writes itself
// (`value_error` and the like: "Invalid cursor", the password policy) are already meant for
// people and pass through. The limits come from the validator's own message (its last number).

import { formatCount, plural } from '../lib/plural.js';

export interface Issue {
  loc: readonly (string | number)[];
  msg: string;
  type?: string | undefined;
}

/** What a field takes, for the kinds of error that say nothing useful on their own (a union, a pattern). */
const FIELD_HINTS: readonly [RegExp, string][] = [
  [/^key_costs\.[^.]+$/, 'Enter a whole number of credits from 0 to 1,000,000, or leave it blank.'],
  [/^expected_binary_hash$/, 'Enter 8 to 128 hexadecimal characters (0-9, a-f), or leave it blank.'],
  [/^unit$/, 'Choose hours, days, weeks, months or lifetime.'],
  [/^role$/, 'Choose admin or reseller.'],
  [/^username$/, 'Use 3 to 32 letters, digits, _ or -.'],
  [/^email$/, 'Enter an email address such as name@example.com, or leave it blank.'],
  [/^allowed_apps(\.\d+)?$/, 'Choose applications from the list.'],
  [/^query\.status$/, 'Choose one of the listed statuses.'],
  [/^query\.level$/, 'Choose one of the listed levels.'],
  [/^type$/, 'Choose IP address or HWID.'],
  [/^max_sessions$/, 'Enter a whole number from 0 (unlimited) to 1,000.'],
  [/^max_devices$/, 'Enter a whole number from 1 to 1,000.'],
];

function hintFor(path: string): string | undefined {
  return FIELD_HINTS.find(([re]) => re.test(path))?.[1];
}

/** The limit the validator's message ends with ("... greater or equal to 8" -> 8). */
function limitOf(msg: string): number | undefined {
  const m = /(-?\d+(?:\.\d+)?)\s*$/.exec(msg);
  return m ? Number(m[1]) : undefined;
}

const fmt = formatCount;
const chars = (n: number) => plural(n, 'character');

/** `loc` without its `body` head: `key_costs.days:30`; query fields keep `query.`. */
export function issuePath(loc: readonly (string | number)[]): string {
  const parts = loc.map(String);
  if (parts[0] === 'body') parts.shift();
  return parts.join('.') || 'body';
}

/** Sentence for one issue, shown under its field. */
export function issueText(issue: Issue): string {
  const path = issuePath(issue.loc);
  const n = limitOf(issue.msg);
  const hint = hintFor(path);
  switch (issue.type) {
    case 'object_required_property':
      return 'Required.';
    case 'extra_forbidden':
      return 'This field is not accepted here.';
    case 'object_min_properties':
      return 'Change at least one field first.';
    case 'string':
      return hint ?? 'Enter text here.';
    case 'string_min_length':
      return n === undefined || n <= 1 ? 'Required: this cannot be empty.' : `Use at least ${chars(n)}.`;
    case 'string_max_length':
      return n === undefined ? 'This is too long.' : `Use at most ${chars(n)}.`;
    case 'string_pattern':
    case 'string_format':
    case 'reg_exp':
      return hint ?? 'This is not in the expected format.';
    case 'integer':
      return hint ?? 'Enter a whole number.';
    case 'number':
      return hint ?? 'Enter a number.';
    case 'integer_minimum':
    case 'number_minimum':
      return n === undefined ? 'This number is too small.' : `Enter ${fmt(n)} or more.`;
    case 'integer_exclusive_minimum':
    case 'number_exclusive_minimum':
      return n === undefined ? 'This number is too small.' : `Enter more than ${fmt(n)}.`;
    case 'integer_maximum':
    case 'number_maximum':
      return n === undefined ? 'This number is too large.' : `Enter ${fmt(n)} or less.`;
    case 'integer_exclusive_maximum':
    case 'number_exclusive_maximum':
      return n === undefined ? 'This number is too large.' : `Enter less than ${fmt(n)}.`;
    case 'integer_multiple_of':
    case 'number_multiple_of':
      return n === undefined ? 'This number is not allowed.' : `Enter a multiple of ${fmt(n)}.`;
    case 'boolean':
      return 'Choose on or off.';
    case 'union':
    case 'literal':
      return hint ?? 'Choose one of the accepted values.';
    case 'array':
      return hint ?? 'Choose from the list.';
    case 'array_max_items':
      return n === undefined ? 'Too many chosen.' : `Choose at most ${fmt(n)}.`;
    case 'array_min_items':
      return n === undefined ? 'Choose more.' : `Choose at least ${fmt(n)}.`;
    case 'array_unique_items':
      return 'Each entry may appear only once.';
    case 'object':
      return 'This value is missing or malformed.';
  }
  // A kind this table does not know: the validator's raw English would name types, so say less.
  if (issue.msg === '' || /^Expected\b/.test(issue.msg)) return hint ?? 'This value is not accepted.';
  return issue.msg;
}

/** A field path as a label for the form-level summary: `key_costs.days:30` -> `Key costs › days:30`. */
export function fieldLabel(path: string): string {
  const [head = '', ...rest] = path.replace(/^query\./, '').split('.');
  const words = head.replace(/_/g, ' ');
  return [words.charAt(0).toUpperCase() + words.slice(1), ...rest].join(' › ');
}
