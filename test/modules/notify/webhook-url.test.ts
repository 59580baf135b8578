// Which webhook targets are public, pinned directly and fast (the mutation run executes it per mutant).
import { BlockList, isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { assertWebhookUrl, isPublicAddress } from '../../../src/modules/notify/webhook-url.js';
import { ValidationError } from '../../../src/errors.js';

describe('webhook targets', () => {
  it('public addresses are public; private, loopback, link-local, documentation and multicast ranges are not', () => {
    const cases: [string, boolean][] = [
      ['8.8.8.8', true],
      ['11.0.0.1', true],
      ['0.1.2.3', false],
      ['9.255.255.255', true],
      ['10.0.0.1', false],
      ['10.255.255.255', false],
      ['100.63.255.255', true],
      ['100.64.0.1', false],
      ['100.127.255.255', false],
      ['100.128.0.1', true],
      ['127.0.0.1', false],
      ['169.254.1.1', false],
      ['172.15.255.255', true],
      ['172.16.0.1', false],
      ['172.31.255.255', false],
      ['172.32.0.1', true],
      ['192.0.0.1', false],
      ['192.0.1.1', true],
      ['192.0.2.1', false],
      ['192.168.1.1', false],
      ['198.18.0.1', false],
      ['198.19.255.255', false],
      ['198.20.0.1', true],
      ['198.51.100.1', false],
      ['203.0.113.1', false],
      ['224.0.0.1', false],
      ['239.255.255.255', false],
      ['240.0.0.1', false],
      ['255.255.255.255', false],
      ['::', false],
      ['::1', false],
      ['::2', true],
      ['fc00::1', false],
      ['fdff::1', false],
      ['fe80::1', false],
      ['febf::1', false],
      ['fec0::1', true],
      ['ff02::1', false],
      ['2001:db8::1', false],
      ['2001:db9::1', true],
      ['64:ff9b::1.2.3.4', false],
      ['64:ff9b:1::1', true],
      ['2606:4700::1111', true],
      ['::ffff:10.0.0.1', false],
      ['::FFFF:10.0.0.1', false],
      ['::ffff:8.8.8.8', true],
      ['not-an-ip', false],
      ['', false],
    ];
    for (const [ip, expected] of cases) expect(isPublicAddress(ip), ip).toBe(expected);
  });

  it('reads IPv4 exactly as node does: every range edge, random addresses and near-addresses', () => {
    // The reference: node's own parser and BlockList over the same ranges.
    const ranges: [string, number][] = [
      ['0.0.0.0', 8],
      ['10.0.0.0', 8],
      ['100.64.0.0', 10],
      ['127.0.0.0', 8],
      ['169.254.0.0', 16],
      ['172.16.0.0', 12],
      ['192.0.0.0', 24],
      ['192.0.2.0', 24],
      ['192.168.0.0', 16],
      ['198.18.0.0', 15],
      ['198.51.100.0', 24],
      ['203.0.113.0', 24],
      ['224.0.0.0', 4],
      ['240.0.0.0', 4],
    ];
    const reference = new BlockList();
    for (const [net, bits] of ranges) reference.addSubnet(net, bits, 'ipv4');
    const expected = (ip: string) => isIP(ip) === 4 && !reference.check(ip, 'ipv4');
    const quad = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
    const samples: string[] = [];
    for (const [net, bits] of ranges) {
      const first = net.split('.').reduce((a, o) => a * 256 + Number(o), 0);
      const last = first + 2 ** (32 - bits) - 1;
      for (const n of [first - 1, first, first + 1, last - 1, last, last + 1])
        if (n >= 0 && n < 2 ** 32) samples.push(quad(n));
    }
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 5000; i++) samples.push(quad(Math.floor(rand() * 2 ** 32)));
    samples.push(
      '01.2.3.4',
      '1.02.3.4',
      '1.2.3.00',
      '1.2.3.0',
      '256.1.1.1',
      '1.2.3',
      '1.2.3.4.5',
      '1..2.3',
      '.1.2.3',
      '1.2.3.',
      '1.2.3.4 ',
      ' 1.2.3.4',
      '1.2.3.-4',
      '1.2.3.1000',
      '0.0.0.0',
      '255.255.255.255',
      '1.2.3.4\0',
      '١.2.3.4',
    );
    for (const ip of samples) expect(isPublicAddress(ip), ip).toBe(expected(ip));
  });

  const rejected = async (raw: string, allowPrivate = false, field?: string) => {
    const err = await assertWebhookUrl(raw, allowPrivate, field).catch((e: unknown) => e);
    expect(err, raw).toBeInstanceOf(ValidationError);
    return (err as ValidationError).issues;
  };

  it('must be https to a public address, without credentials', async () => {
    expect((await assertWebhookUrl('https://8.8.8.8/hook?x=1', false)).href).toBe('https://8.8.8.8/hook?x=1');
    expect((await assertWebhookUrl('https://[2606:4700::1111]:8443/h', false)).hostname).toBe('[2606:4700::1111]');
    expect(await rejected('http://8.8.8.8/hook')).toEqual([
      { loc: ['body', 'webhook'], msg: 'Webhook must be a public https URL', type: 'url_not_public' },
    ]);
    expect((await rejected('https://10.0.0.1/', false, 'alert_webhook'))[0]!.loc).toEqual(['body', 'alert_webhook']);
    await rejected('https://[::1]/');
    await rejected('https://user:pw@8.8.8.8/');
    await rejected('https://user@8.8.8.8/');
    await rejected('https://:pw@8.8.8.8/');
    await rejected('not a url');
    await rejected('https://localhost/'); // resolves to loopback
  });

  it('with private targets allowed (tests), http and loopback pass, other schemes and credentials do not', async () => {
    expect((await assertWebhookUrl('http://127.0.0.1:9/h', true)).port).toBe('9');
    expect((await assertWebhookUrl('https://localhost/h', true)).hostname).toBe('localhost');
    await rejected('ftp://127.0.0.1/', true);
    await rejected('http://u:p@127.0.0.1/', true);
    await rejected('nonsense', true);
  });
});
