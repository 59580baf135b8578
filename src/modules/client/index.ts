// The client module's public surface: the client API's gate, sessions and shared request shapes.
// Other modules and the composition root import only this file.
export { type Admittee, refusalOf } from './admission.js';
export { type CachedApp, ClientAppCache } from './client-app-cache.js';
export { type AuditNote, type ClientCall, type ClientOutcome, outcome } from './client-call.js';
export { clientCallRunner, clientHandler, noteEchoedRoute, type ClientDeps, type ClientInput } from './client-gate.js';
export {
  BeatBody,
  type BeatRequest,
  InitBody,
  type InitRequest,
  LicenseBody,
  type LicenseRequest,
  LoginBody,
  type LoginRequest,
  OfflineBody,
  type OfflineRequest,
  RegisterBody,
  type RegisterRequest,
  StartBody,
  type StartRequest,
  StopBody,
  type StopRequest,
  TrialBody,
  type TrialRequest,
} from './client-requests.js';
export { type ClientSession, ClientSessions, SESSION_KEY_PREFIX } from './client-sessions.js';
export { clientDoc, clientKeysRoute, clientLimiter, type RequestLimiterFactory } from './client.routes.js';
export { NonceRepository } from './nonce.repository.js';
