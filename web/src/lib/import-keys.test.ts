// Reading an import's text: one key per line, CSV with the list columns (the generator's own .csv
// among them), JSON lists, KeyAuth's licenses as JSON, and what cannot be read.
import { describe, expect, it } from 'vitest';
import { ImportParseError, parseCsv, parseImport, rowOfIssue } from './import-keys.js';
import { keysCsv } from './download.js';

describe('parseImport', () => {
  it('reads one key per line, skipping blank lines and surrounding spaces', () => {
    expect(parseImport('\uFEFFAAAA-1111\r\n\n  BBBB-2222  \n')).toEqual({
      kind: 'lines',
      body: { format: 'list', keys: [{ key: 'AAAA-1111' }, { key: 'BBBB-2222' }] },
    });
  });

  it('reads a CSV by its header, keeping only the list columns and dropping empty cells', () => {
    const csv = 'Key,level,note,colour,duration,unit\r\n"K-1",2,"a, ""quoted"" note",red,30,days\r\nK-2,,,,,\r\n';
    expect(parseImport(csv)).toEqual({
      kind: 'csv',
      body: {
        format: 'list',
        keys: [{ key: 'K-1', level: '2', note: 'a, "quoted" note', duration: '30', unit: 'days' }, { key: 'K-2' }],
      },
    });
  });

  it("reads the generator's own .csv download, lifetime keys without a duration", () => {
    const text = keysCsv([
      { id: '1', key: 'GEN-1', level: 1, duration_value: 30, duration_unit: 'days', note: '' },
      { id: '2', key: 'GEN-2', level: 3, duration_value: 0, duration_unit: 'lifetime', note: 'vip' },
    ]);
    expect(parseImport(text).body.keys).toEqual([
      { key: 'GEN-1', level: '1', duration: '30', unit: 'days' },
      { key: 'GEN-2', level: '3', unit: 'lifetime', note: 'vip' },
    ]);
  });

  it('reads JSON lists of keys or rows, and KeyAuth rows (bare or under "licenses")', () => {
    expect(parseImport('["A-1", {"key": "B-2", "level": 2}]').body).toEqual({
      format: 'list',
      keys: [{ key: 'A-1' }, { key: 'B-2', level: 2 }],
    });
    const rows = [{ key: 'KA-1', expires: 86400, status: 'Not Used', level: 1, note: '', usedby: '', usedon: null }];
    expect(parseImport(JSON.stringify(rows))).toEqual({
      kind: 'keyauth-json',
      body: { format: 'keyauth', keys: rows },
    });
    expect(parseImport(JSON.stringify({ licenses: rows })).body).toEqual({ format: 'keyauth', keys: rows });
  });

  it('says why a text cannot be read', () => {
    expect(() => parseImport('  \n')).toThrow(ImportParseError);
    expect(() => parseImport('[1, 2')).toThrow(/cannot be read as JSON/);
    expect(() => parseImport('{"other": 1}')).toThrow(/no rows/);
    expect(() => parseImport('name,level\nx,1')).toThrow(/"key" column/);
    expect(() => parseImport('key,level\n')).toThrow(/no keys/);
  });
});

describe('parseCsv', () => {
  it('handles quotes, embedded newlines, CRLF and a missing final newline', () => {
    expect(parseCsv('a,"b\nc",d\r\n1,2,3')).toEqual([
      ['a', 'b\nc', 'd'],
      ['1', '2', '3'],
    ]);
  });
});

describe('rowOfIssue', () => {
  it("finds the row a 422's field path names", () => {
    expect(rowOfIssue('keys.12.level')).toEqual({ index: 12, field: 'level' });
    expect(rowOfIssue('keys.0')).toEqual({ index: 0, field: 'key' });
    expect(rowOfIssue('format')).toBeNull();
  });
});
