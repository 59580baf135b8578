/** Effective beat interval: heartbeat_interval clamped to [5, 300] (docs/protocol.md 6). */
export function beatInterval(heartbeatInterval: number): number {
  return Math.min(300, Math.max(5, heartbeatInterval));
}
