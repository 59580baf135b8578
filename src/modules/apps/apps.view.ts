// API shapes (snake_case, ISO timestamps) of applications and blacklist entries.
import type { Application, BlacklistEntry } from '../../platform/db/entities/index.js';
import { appsPolicy, type Principal } from '../access/index.js';
import { beatInterval } from '../heartbeat/index.js';

/** The app's credentials as the caller may see them: the one place the api_secret is hidden (appsPolicy). */
export function credentialsView(a: Application, p: Principal) {
  return {
    api_key: a.apiKey,
    ...(appsPolicy.seesSecret(p) ? { api_secret: a.apiSecret } : {}),
    owner_id: a.ownerId,
  };
}

export function appView(a: Application, p: Principal, stats?: { keys: number; users: number }) {
  return {
    id: a.id,
    name: a.name,
    version: a.version,
    description: a.description,
    enabled: a.enabled,
    disabled_message: a.disabledMessage,
    keys_paused: a.keysPaused,
    hwid_lock: a.hwidLock,
    require_signature: a.requireSignature,
    injection_detection: a.injectionDetection,
    require_heartbeat: a.requireHeartbeat,
    force_update: a.forceUpdate,
    update_url: a.updateUrl,
    update_message: a.updateMessage,
    force_encryption: a.forceEncryption,
    hash_check: a.hashCheck,
    expected_binary_hash: a.expectedBinaryHash,
    webhook: a.webhook,
    key_costs: a.keyCosts,
    allowed_hashes: a.allowedHashes,
    heartbeat_interval: a.heartbeatInterval,
    beat_interval: beatInterval(a.heartbeatInterval),
    max_sessions: a.maxSessions,
    session_overflow: a.sessionOverflow,
    max_devices: a.maxDevices,
    trial_hours: a.trialHours,
    trial_level: a.trialLevel,
    offline_days: a.offlineDays,
    grace_hours: a.graceHours,
    portal_enabled: a.portalEnabled,
    portal_reset_cooldown_hours: a.portalResetCooldownHours,
    ...credentialsView(a, p),
    created_at: a.createdAt.toISOString(),
    updated_at: a.updatedAt.toISOString(),
    ...(stats ? { stats } : {}),
  };
}

export function banView(b: BlacklistEntry) {
  return {
    id: b.id,
    app_id: b.appId,
    type: b.type,
    value: b.value,
    reason: b.reason,
    created_at: b.createdAt.toISOString(),
    created_by: b.createdBy,
  };
}
