// A windowed table (TanStack Virtual): only the rows in view, plus a few either side, are in the
// DOM, whatever the number of rows, so scrolling 50,000 keys costs what scrolling 50 does. Rows
// have one fixed height (the stylesheet's --row-height, one line per cell, full text on hover) and
// columns fixed widths, so nothing shifts as rows come and go. Each row is memoized: ticking a
// checkbox re-renders that row only. Spacer rows above and below keep the scrollbar true; their
// height is set through the DOM (element.style), which the strict style-src CSP allows.
import { memo, useEffect, useRef, type ReactNode } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';

export const ROW_HEIGHT = 44;

export interface Column<T> {
  id: string;
  header: ReactNode;
  cell: (row: T) => ReactNode;
  /** The cell's hover text when it may be cut off. */
  title?: (row: T) => string | undefined;
}

export interface RowSelection<T> {
  isSelected: (row: T) => boolean;
  /** Must keep its identity across renders (rows are memoized on it). */
  toggle: (row: T, selected: boolean) => void;
  /** Names a row for its checkbox's accessible label. */
  label: (row: T) => string;
  all: { checked: boolean; indeterminate: boolean; label: string; toggle: (selected: boolean) => void };
}

interface RowProps<T> {
  row: T;
  index: number;
  columns: readonly Column<T>[];
  selected: boolean | undefined;
  toggle: ((row: T, selected: boolean) => void) | undefined;
  label: string | undefined;
  rowId: string;
}

function RowView<T>({ row, index, columns, selected, toggle, label, rowId }: RowProps<T>) {
  return (
    <tr data-row-id={rowId} aria-rowindex={index + 2} className={selected ? 'selected' : undefined}>
      {toggle && (
        <td className="col-select">
          <input type="checkbox" aria-label={label} checked={selected === true} onChange={(e) => toggle(row, e.target.checked)} />
        </td>
      )}
      {columns.map((c) => <td key={c.id} data-col={c.id} title={c.title?.(row)}>{c.cell(row)}</td>)}
    </tr>
  );
}
const Row = memo(RowView) as typeof RowView;

export function DataTable<T>({ caption, testId, columns, count, rowAt, rowId, selection, empty, loading, onRange, resetKey, className }: {
  caption: string;
  testId?: string;
  /** Must keep its identity across renders (rows are memoized on it). */
  columns: readonly Column<T>[];
  /** Rows to render; an index whose row is not there yet shows `loading`. */
  count: number;
  rowAt: (index: number) => T | undefined;
  rowId: (row: T) => string;
  selection?: RowSelection<T>;
  empty: ReactNode;
  loading?: ReactNode;
  /** Told which rows (inclusive, overscan included) are rendered, after each render. */
  onRange?: (first: number, last: number) => void;
  /** Scrolls back to the top when it changes (new filters). */
  resetKey?: string;
  /** A class naming the table's column widths in the stylesheet. */
  className?: string;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
    // React batches the scroll updates into its own frame instead of rendering inside each scroll event.
    useFlushSync: false,
  });
  const items = v.getVirtualItems();
  const first = items[0]?.index ?? 0;
  const last = items[items.length - 1]?.index ?? 0;
  useEffect(() => {
    onRange?.(first, last);
  }, [first, last, onRange]);
  useEffect(() => {
    if (scrollRef.current) scrollRef.current.scrollTop = 0;
  }, [resetKey]);

  const columnCount = columns.length + (selection ? 1 : 0);
  const top = items[0]?.start ?? 0;
  const bottom = Math.max(0, v.getTotalSize() - (items[items.length - 1]?.end ?? 0));
  return (
    <div className="table-wrap table-scroll" ref={scrollRef} tabIndex={0} role="region" aria-label={caption} data-testid={testId}>
      <table className={`table table-fixed${className ? ` ${className}` : ''}`} aria-rowcount={count + 1}>
        <caption className="sr-only">{caption}</caption>
        <colgroup>
          {selection && <col className="col-select" />}
          {columns.map((c) => <col key={c.id} className={`col-${c.id}`} />)}
        </colgroup>
        <thead>
          <tr aria-rowindex={1}>
            {selection && (
              <th scope="col" className="col-select">
                <input
                  type="checkbox"
                  aria-label={selection.all.label}
                  checked={selection.all.checked}
                  ref={(el) => {
                    if (el) el.indeterminate = selection.all.indeterminate;
                  }}
                  onChange={(e) => selection.all.toggle(e.target.checked)}
                />
              </th>
            )}
            {columns.map((c) => <th key={c.id} scope="col">{c.header}</th>)}
          </tr>
        </thead>
        <tbody>
          {count === 0 && <tr><td colSpan={columnCount} className="empty-cell">{empty}</td></tr>}
          {top > 0 && <tr className="spacer" aria-hidden="true"><td colSpan={columnCount} style={{ height: top }} /></tr>}
          {items.map((item) => {
            const row = rowAt(item.index);
            if (row === undefined) {
              return (
                <tr key={`loading-${item.index}`} className="loading-row" aria-rowindex={item.index + 2}>
                  <td colSpan={columnCount}>{loading ?? <span className="muted">Loading…</span>}</td>
                </tr>
              );
            }
            const id = rowId(row);
            return (
              <Row
                key={id}
                row={row}
                index={item.index}
                rowId={id}
                columns={columns}
                selected={selection?.isSelected(row)}
                toggle={selection?.toggle}
                label={selection ? `Select ${selection.label(row)}` : undefined}
              />
            );
          })}
          {bottom > 0 && <tr className="spacer" aria-hidden="true"><td colSpan={columnCount} style={{ height: bottom }} /></tr>}
        </tbody>
      </table>
    </div>
  );
}
