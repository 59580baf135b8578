// The signed-in account (GET /api/auth/me), shared by every view. A 401 anywhere signs the page out.
import { createContext, useContext } from 'react';
import type { Me } from './api/responses.js';
import type { Caller } from './lib/permissions.js';

export type SessionAccount = Me['account'];

export interface Session {
  account: SessionAccount;
  caller: Caller;
  signOut(): Promise<void>;
  refresh(): void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside a signed-in page');
  return s;
}

export function callerOf(a: SessionAccount): Caller {
  return { role: a.role, permissions: a.permissions ?? null };
}
