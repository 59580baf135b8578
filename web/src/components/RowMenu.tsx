// One actions menu per table (a row's "Actions" button opens it under itself): a popover in the top
// layer, so the table's scroll box does not clip it, with light dismiss (a click elsewhere, Escape)
// from the browser. Arrow keys move between items, and focus goes back to the row's button on close.
// Rows come and go while scrolling, so the menu closes when its table scrolls.
import { useCallback, useEffect, useRef, useState } from 'react';

export interface MenuItem {
  label: string;
  danger?: boolean;
  disabled?: boolean;
  onSelect: () => void;
}

export interface OpenMenu {
  anchor: HTMLElement;
  label: string;
  items: MenuItem[];
}

/** The state of a table's menu: `open` is stable, so memoized rows can take it. */
export function useRowMenu(): { menu: OpenMenu | null; open: (m: OpenMenu) => void; close: (m: OpenMenu) => void } {
  const [menu, setMenu] = useState<OpenMenu | null>(null);
  const open = useCallback((m: OpenMenu) => setMenu(m), []);
  // Only the menu that closed: another row's menu may have been opened by the same click.
  const close = useCallback((m: OpenMenu) => setMenu((cur) => (cur === m ? null : cur)), []);
  return { menu, open, close };
}

export function RowMenu({ menu, onClose }: { menu: OpenMenu | null; onClose: (m: OpenMenu) => void }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el || !menu) return;
    el.showPopover();
    // Under the button, right-aligned with it, inside the viewport.
    const a = menu.anchor.getBoundingClientRect();
    const w = el.offsetWidth;
    const h = el.offsetHeight;
    const below = a.bottom + 4 + h <= window.innerHeight;
    el.style.left = `${Math.max(8, Math.min(a.right - w, window.innerWidth - w - 8))}px`;
    el.style.top = `${below ? a.bottom + 4 : Math.max(8, a.top - 4 - h)}px`;
    el.querySelector<HTMLButtonElement>('button:not([disabled])')?.focus();
    const anchor = menu.anchor;
    const onToggle = (e: Event) => {
      if ((e as ToggleEvent).newState === 'closed') {
        onClose(menu);
        if (anchor.isConnected && (document.activeElement === document.body || el.contains(document.activeElement))) anchor.focus();
      }
    };
    const onScroll = (e: Event) => {
      if (!el.contains(e.target as Node)) el.hidePopover();
    };
    el.addEventListener('toggle', onToggle);
    window.addEventListener('scroll', onScroll, true);
    return () => {
      el.removeEventListener('toggle', onToggle);
      window.removeEventListener('scroll', onScroll, true);
      if (el.matches(':popover-open')) el.hidePopover();
    };
  }, [menu, onClose]);

  const move = (e: React.KeyboardEvent<HTMLDivElement>) => {
    const buttons = [...(ref.current?.querySelectorAll<HTMLButtonElement>('button:not([disabled])') ?? [])];
    const i = buttons.indexOf(document.activeElement as HTMLButtonElement);
    const to = e.key === 'ArrowDown' ? i + 1 : e.key === 'ArrowUp' ? i - 1 : e.key === 'Home' ? 0 : e.key === 'End' ? buttons.length - 1 : null;
    if (to === null || buttons.length === 0) return;
    e.preventDefault();
    buttons[(to + buttons.length) % buttons.length]?.focus();
  };

  return (
    <div ref={ref} popover="auto" className="menu" role="menu" aria-label={menu?.label} onKeyDown={move}>
      {menu?.items.map((item) => (
        <button
          key={item.label}
          type="button"
          role="menuitem"
          className={`menu-item${item.danger ? ' danger' : ''}`}
          disabled={item.disabled}
          onClick={() => {
            ref.current?.hidePopover();
            item.onSelect();
          }}
        >
          {item.label}
        </button>
      ))}
    </div>
  );
}

/** The row's button that opens the menu. */
export function MenuButton({ label, onOpen }: { label: string; onOpen: (anchor: HTMLElement) => void }) {
  return (
    <button type="button" className="btn btn-ghost small menu-button" aria-haspopup="menu" aria-label={label} title={label}
      onClick={(e) => onOpen(e.currentTarget)}>
      ⋯
    </button>
  );
}
