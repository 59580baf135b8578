// A table on TanStack Table: optional row selection (checkboxes with labels), a caption for screen
// readers, horizontal scrolling on narrow screens, and an empty state inside the table.
import { flexRender, getCoreRowModel, useReactTable, type ColumnDef, type RowSelectionState } from '@tanstack/react-table';
import type { ReactNode } from 'react';

export function DataTable<T>({ caption, data, columns, rowId, selection, onSelection, rowLabel, empty, testId }: {
  caption: string;
  data: T[];
  columns: ColumnDef<T, any>[];
  rowId: (row: T) => string;
  selection?: RowSelectionState;
  onSelection?: (s: RowSelectionState) => void;
  /** Names a row for the screen reader label of its checkbox. */
  rowLabel?: (row: T) => string;
  empty: ReactNode;
  testId?: string;
}) {
  const selectable = selection !== undefined && onSelection !== undefined;
  const selectColumn: ColumnDef<T, any> = {
    id: '_select',
    header: ({ table }) => (
      <input
        type="checkbox"
        aria-label="Select all rows"
        checked={table.getIsAllRowsSelected()}
        ref={(el) => {
          if (el) el.indeterminate = table.getIsSomeRowsSelected();
        }}
        onChange={table.getToggleAllRowsSelectedHandler()}
      />
    ),
    cell: ({ row }) => (
      <input type="checkbox" aria-label={`Select ${rowLabel ? rowLabel(row.original) : 'row'}`} checked={row.getIsSelected()} onChange={row.getToggleSelectedHandler()} />
    ),
  };
  const table = useReactTable({
    data,
    columns: selectable ? [selectColumn, ...columns] : columns,
    getCoreRowModel: getCoreRowModel(),
    getRowId: rowId,
    enableRowSelection: selectable,
    state: selectable ? { rowSelection: selection } : {},
    onRowSelectionChange: (updater) => {
      if (!onSelection || !selection) return;
      onSelection(typeof updater === 'function' ? updater(selection) : updater);
    },
  });
  return (
    <div className="table-wrap" tabIndex={0} role="region" aria-label={caption} data-testid={testId}>
      <table className="table">
        <caption className="sr-only">{caption}</caption>
        <thead>
          {table.getHeaderGroups().map((g) => (
            <tr key={g.id}>
              {g.headers.map((h) => (
                <th key={h.id} scope="col" className={h.column.id === '_select' ? 'col-select' : undefined}>
                  {h.isPlaceholder ? null : flexRender(h.column.columnDef.header, h.getContext())}
                </th>
              ))}
            </tr>
          ))}
        </thead>
        <tbody>
          {table.getRowModel().rows.length === 0 && (
            <tr><td colSpan={table.getAllLeafColumns().length} className="empty-cell">{empty}</td></tr>
          )}
          {table.getRowModel().rows.map((r) => (
            <tr key={r.id} data-row-id={r.id} className={r.getIsSelected() ? 'selected' : undefined}>
              {r.getVisibleCells().map((c) => (
                <td key={c.id} data-col={c.column.id}>{flexRender(c.column.columnDef.cell, c.getContext())}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
