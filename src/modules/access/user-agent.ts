// A User-Agent in a few words for the Security page ("Firefox 128 on Linux", "curl 8.5.0"): enough
// to recognise one's own browser among sign-ins and sessions. Unrecognised agents show their start.

const BROWSERS: readonly [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, 'Edge'],
  [/\bOPR\/(\d+)/, 'Opera'],
  [/\bFirefox\/(\d+)/, 'Firefox'],
  [/\b(?:HeadlessChrome|Chrome|CriOS)\/(\d+)/, 'Chrome'],
  [/\bVersion\/(\d+)[\d.]* (?:Mobile\/\S+ )?Safari\//, 'Safari'],
];
const SYSTEMS: readonly [RegExp, string][] = [
  [/Android/, 'Android'],
  [/iPhone|iPad|iPod/, 'iOS'],
  [/Windows/, 'Windows'],
  [/Mac OS X|Macintosh/, 'macOS'],
  [/CrOS/, 'ChromeOS'],
  [/Linux/, 'Linux'],
];
const TOOLS = /^(curl|Wget|python-requests|node-fetch|undici|Go-http-client|PostmanRuntime|HTTPie)\/([\w.]+)/i;

export function browserOf(userAgent: string | null | undefined): string {
  const ua = (userAgent ?? '').trim();
  if (ua === '') return 'Unknown';
  const tool = TOOLS.exec(ua);
  if (tool) return `${tool[1]} ${tool[2]}`;
  const browser = BROWSERS.map(([re, name]) => ({ m: re.exec(ua), name })).find((b) => b.m);
  const system = SYSTEMS.find(([re]) => re.test(ua))?.[1];
  if (browser?.m) return `${browser.name} ${browser.m[1]}${system ? ` on ${system}` : ''}`;
  return ua.length > 60 ? `${ua.slice(0, 57)}...` : ua;
}
