// Short confirmations and failures of actions, announced to screen readers (role=status).
import { createContext, useCallback, useContext, useState, type ReactNode } from 'react';

interface Notice {
  id: number;
  tone: 'ok' | 'error';
  text: string;
}

const Ctx = createContext<(tone: Notice['tone'], text: string) => void>(() => undefined);

let seq = 0;

export function NoticeProvider({ children }: { children: ReactNode }) {
  const [list, setList] = useState<Notice[]>([]);
  const push = useCallback((tone: Notice['tone'], text: string) => {
    const id = ++seq;
    setList((l) => [...l.slice(-3), { id, tone, text }]);
    setTimeout(() => setList((l) => l.filter((n) => n.id !== id)), tone === 'error' ? 8000 : 4000);
  }, []);
  return (
    <Ctx.Provider value={push}>
      {children}
      <div className="notices" role="status" aria-live="polite">
        {list.map((n) => (
          <div key={n.id} className={`notice notice-${n.tone}`}>
            {n.text}
          </div>
        ))}
      </div>
    </Ctx.Provider>
  );
}

export function useNotice() {
  return useContext(Ctx);
}
