/**
 * A secret value and the secrets inside it: a URL's password (as written and decoded), which a
 * message may name alone (the store's URL: postgres://user:password@host/db).
 */
export function secretParts(value: string): string[] {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return [value];
  try {
    const url = new URL(value);
    const raw = [url.password, url.searchParams.get('password') ?? ''];
    const passwords = raw.flatMap((p) => [p, safeDecode(p)]).filter((p) => p.length >= 8);
    return [...new Set([value, ...passwords])];
  } catch {
    return [value];
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
