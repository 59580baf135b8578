// The window title per view ("Licenses · My Game · Keywarden"), so tabs, history and bookmarks say
// where they lead.
import { useEffect } from 'react';

export const PRODUCT = 'Keywarden';

export function pageTitle(...parts: (string | undefined)[]): string {
  return [...parts.filter((p): p is string => !!p), PRODUCT].join(' · ');
}

export function useTitle(...parts: (string | undefined)[]): void {
  const title = pageTitle(...parts);
  useEffect(() => {
    document.title = title;
  }, [title]);
}
