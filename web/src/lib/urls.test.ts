import { describe, expect, it } from 'vitest';
import { updateUrlProblem, webhookProblem } from './urls.js';

describe('addresses checked in the form', () => {
  it('take blank (it clears) and full http(s) update addresses', () => {
    expect(updateUrlProblem('')).toBeUndefined();
    expect(updateUrlProblem('https://example.com/download')).toBeUndefined();
    expect(updateUrlProblem('http://downloads.example.com/app.zip')).toBeUndefined();
    expect(updateUrlProblem('example.com/download')).toMatch(/full web address/);
    expect(updateUrlProblem('javascript:alert(1)')).toMatch(/full web address/);
    expect(updateUrlProblem('https://user:pw@example.com/')).toMatch(/user name and password/);
  });
  it('take only https webhooks', () => {
    expect(webhookProblem('')).toBeUndefined();
    expect(webhookProblem('https://discord.com/api/webhooks/1/abc')).toBeUndefined();
    expect(webhookProblem('http://example.com/hook')).toMatch(/https only/);
    expect(webhookProblem('ftp://example.com/hook')).toMatch(/full https:\/\/ address/);
    expect(webhookProblem('discord.com/api/webhooks/1/abc')).toMatch(/full https:\/\/ address/);
  });
});
