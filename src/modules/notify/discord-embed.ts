// The Discord form of an alert webhook (docs/protocol.md 10: "a Discord-style embed (screenshot attached)").
// Discord's execute-webhook call takes JSON, or multipart/form-data with the JSON in `payload_json`
// and files in `files[n]`, which the embed refers to as `attachment://<filename>`. Values the client
// chose (username, HWID) are shown as inline code, so they cannot render links or mentions.
import { randomUUID } from 'node:crypto';

export interface Screenshot {
  bytes: Buffer;
  /** File extension as stored: png, jpg, webp or bin. */
  ext: string;
}

interface DiscordInput {
  event: string;
  appName: string;
  occurredAt: string;
  /** The webhook data after hiding for the webhook's owner. */
  data: Record<string, unknown>;
  screenshot?: Screenshot | undefined;
  /** Credit line the geo data's licence asks for, shown when a location is. */
  attribution?: string | null | undefined;
}

export interface EncodedBody {
  body: Buffer;
  contentType: string;
}

const TITLES: Record<string, string> = {
  'client.register': 'Registration',
  'client.login': 'Login',
  'client.license': 'License activation',
};
const IMAGE_TYPES: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' };
const COLOR_ALERT = 0xe67e22;
const COLOR_OK = 0x2ecc71;
/** Discord caps a field value at 1,024 characters and a title at 256. */
const FIELD_MAX = 1_000;

function code(v: unknown): string {
  const s = typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v);
  if (s === '') return '-';
  return `\`${s.replaceAll('`', 'ˋ').replaceAll('\n', ' ').slice(0, FIELD_MAX)}\``;
}

function discordPayload(input: DiscordInput): Record<string, unknown> {
  const d = input.data;
  const alert = Array.isArray(d.alert) ? (d.alert as string[]) : [];
  const what = TITLES[input.event] ?? input.event;
  const title =
    alert.length > 0
      ? `${alert.map((a) => (a === 'new_device' ? 'New device' : 'New location')).join(' and ')}: ${what}`
      : what;
  const fields: { name: string; value: string; inline: boolean }[] = [
    { name: 'Application', value: code(input.appName), inline: true },
  ];
  if (typeof d.username === 'string') fields.push({ name: 'User', value: code(d.username), inline: true });
  if (typeof d.key_preview === 'string') fields.push({ name: 'Key', value: code(d.key_preview), inline: true });
  if ('hwid' in d) fields.push({ name: 'HWID', value: code(d.hwid), inline: false });
  if ('ip' in d) fields.push({ name: 'IP', value: code(d.ip), inline: true });
  if ('location' in d)
    fields.push({ name: 'Location', value: d.location ? code(d.location) : 'unknown', inline: true });
  const unix = Math.floor(Date.parse(input.occurredAt) / 1000);
  fields.push({ name: 'Time', value: `<t:${unix}:F>`, inline: false });
  const image =
    input.screenshot && IMAGE_TYPES[input.screenshot.ext]
      ? { image: { url: `attachment://screenshot.${input.screenshot.ext}` } }
      : {};
  const credit = 'location' in d && d.location && input.attribution ? ` · ${input.attribution}` : '';
  return {
    username: 'Keywarden',
    // Nothing in an alert may ping anyone, whatever a username says.
    allowed_mentions: { parse: [] },
    embeds: [
      {
        title: title.slice(0, 256),
        color: alert.length > 0 ? COLOR_ALERT : COLOR_OK,
        timestamp: input.occurredAt,
        fields,
        ...image,
        footer: { text: `Keywarden ${input.event}${credit}` },
      },
    ],
    ...(input.screenshot ? { attachments: [{ id: 0, filename: `screenshot.${input.screenshot.ext}` }] } : {}),
  };
}

/** JSON when there is nothing to attach; else multipart with `payload_json` and `files[0]`. */
export function discordBody(input: DiscordInput): EncodedBody {
  const json = JSON.stringify(discordPayload(input));
  const shot = input.screenshot;
  if (!shot) return { body: Buffer.from(json), contentType: 'application/json' };
  const boundary = `keywarden-${randomUUID()}`;
  const type = IMAGE_TYPES[shot.ext] ?? 'application/octet-stream';
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="payload_json"\r\n` +
        `Content-Type: application/json\r\n\r\n${json}\r\n`,
    ),
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="files[0]"; filename="screenshot.${shot.ext}"\r\n` +
        `Content-Type: ${type}\r\n\r\n`,
    ),
    shot.bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
