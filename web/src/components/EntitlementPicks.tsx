// A checkbox per entitlement of the application's catalogue (docs/protocol.md 12.3): the generator and the
// key details pick a key's codes with it; the value is kept sorted, as the server answers it.
import type { Entitlements } from '../api/responses.js';

export function EntitlementPicks({
  catalogue,
  value,
  onChange,
  name,
  disabled,
  className,
}: {
  catalogue: Entitlements['entitlements'];
  value: readonly string[];
  onChange: (codes: string[]) => void;
  /** Prefix of each checkbox's name. */
  name: string;
  disabled?: boolean;
  className?: string;
}) {
  return (
    <fieldset className={`entitlement-picks${className ? ` ${className}` : ''}`}>
      <legend>Entitlements</legend>
      {catalogue.length === 0 && <p className="muted small">No entitlements in the catalogue (Settings).</p>}
      {catalogue.map((e) => (
        <label key={e.code} className="check">
          <input
            type="checkbox"
            name={`${name}-${e.code}`}
            checked={value.includes(e.code)}
            disabled={disabled}
            onChange={(ev) =>
              onChange(ev.target.checked ? [...value, e.code].sort() : value.filter((c) => c !== e.code))
            }
          />{' '}
          <code>{e.code}</code> {e.name}
        </label>
      ))}
    </fieldset>
  );
}
