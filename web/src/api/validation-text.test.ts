// A 422 in words a person understands: the validator's kinds mapped to sentences with their limits,
// field hints where the kind alone says nothing, and the server's own sentences passed through.
import { describe, expect, it } from 'vitest';
import { apiError } from './errors.js';
import { fieldLabel, issueText } from './validation-text.js';

const text = (type: string, msg: string, loc: (string | number)[] = ['body', 'name']) => issueText({ loc, msg, type });

describe('422 wording', () => {
  it('says what to type instead of naming types', () => {
    expect(text('string_min_length', 'Expected string length greater or equal to 1')).toBe(
      'Required: this cannot be empty.',
    );
    expect(text('string_min_length', 'Expected string length greater or equal to 8', ['body', 'password'])).toBe(
      'Use at least 8 characters.',
    );
    expect(text('string_max_length', 'Expected string length less or equal to 4096')).toBe(
      'Use at most 4,096 characters.',
    );
    expect(text('string_max_length', 'Expected string length less or equal to 1')).toBe('Use at most 1 character.');
    expect(text('integer', 'Expected integer', ['body', 'heartbeat_interval'])).toBe('Enter a whole number.');
    expect(text('integer_minimum', 'Expected integer to be greater or equal to 1', ['body', 'amount'])).toBe(
      'Enter 1 or more.',
    );
    expect(text('integer_maximum', 'Expected integer to be less or equal to 500', ['body', 'amount'])).toBe(
      'Enter 500 or less.',
    );
    expect(text('number_exclusive_minimum', 'Expected number to be greater than 0')).toBe('Enter more than 0.');
    expect(text('boolean', 'Expected boolean', ['body', 'enabled'])).toBe('Choose on or off.');
    expect(text('object_required_property', 'Expected required property', ['body', 'password'])).toBe('Required.');
    expect(text('extra_forbidden', 'Extra inputs are not permitted', ['body', 'colour'])).toBe(
      'This field is not accepted here.',
    );
    expect(text('array_max_items', 'Expected array length to be less or equal to 1000', ['body', 'allowed_apps'])).toBe(
      'Choose at most 1,000.',
    );
  });

  it('uses what the field takes where the kind says nothing (a union, a pattern)', () => {
    expect(text('union', 'Expected union value', ['body', 'key_costs', 'days:30'])).toBe(
      'Enter a whole number of credits from 0 to 1,000,000, or leave it blank.',
    );
    expect(text('union', 'Expected union value', ['body', 'expected_binary_hash'])).toMatch(/hexadecimal/);
    expect(text('union', 'Expected union value', ['body', 'unit'])).toBe(
      'Choose hours, days, weeks, months or lifetime.',
    );
    expect(text('string_pattern', "Expected string to match '^[a-zA-Z0-9_-]{3,32}$'", ['body', 'username'])).toBe(
      'Use 3 to 32 letters, digits, _ or -.',
    );
    expect(text('union', 'Expected union value', ['body', 'max_sessions'])).toBe(
      'Enter a whole number from 0 (unlimited) to 1,000.',
    );
    expect(text('union', 'Expected union value', ['body', 'max_devices'])).toBe(
      'Enter a whole number from 1 to 1,000.',
    );
    expect(text('union', 'Expected union value', ['body', 'mystery'])).toBe('Choose one of the accepted values.');
    expect(text('string_pattern', "Expected string to match '^x$'", ['body', 'mystery'])).toBe(
      'This is not in the expected format.',
    );
  });

  it("passes the server's own sentences through, and never shows raw validator English", () => {
    expect(text('value_error', 'Invalid cursor', ['query', 'cursor'])).toBe('Invalid cursor');
    expect(text('value_error', 'Password must contain a letter and a non-letter', ['body', 'password'])).toBe(
      'Password must contain a letter and a non-letter',
    );
    expect(text('some_new_kind', 'Expected something new')).toBe('This value is not accepted.');
    expect(issueText({ loc: ['body', 'x'], msg: '' })).toBe('This value is not accepted.');
  });

  it('puts each sentence next to its field and names the field in the summary', () => {
    const e = apiError(422, 'Unprocessable Entity', {
      detail: [
        { loc: ['body', 'heartbeat_interval'], msg: 'Expected integer', type: 'integer' },
        { loc: ['body', 'key_costs', 'days:30'], msg: 'Expected union value', type: 'union' },
      ],
    });
    expect(e.field('heartbeat_interval')).toBe('Enter a whole number.');
    expect(e.field('key_costs')).toMatch(/^Enter a whole number of credits/);
    expect(e.message).toBe(
      'Heartbeat interval: Enter a whole number. Key costs › days:30: Enter a whole number of credits from 0 to 1,000,000, or leave it blank.',
    );
    expect(fieldLabel('query.q')).toBe('Q');
  });
});
