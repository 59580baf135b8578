// The client calls that open a session and activate it: init, register, login, license.
import type { Router } from '../../platform/http/router.js';
import { SCREENSHOT_BODY_LIMIT } from '../../platform/http/router.js';
import {
  InitBody,
  LicenseBody,
  LoginBody,
  OfflineBody,
  RegisterBody,
  TrialBody,
  clientDoc,
  clientHandler,
  type ClientDeps,
  type RequestLimiterFactory,
} from '../client/index.js';
import type { ActivationService } from './activation.service.js';

interface ActivationRoutesDeps {
  gate: ClientDeps;
  activation: ActivationService;
  limit: RequestLimiterFactory;
}

export function activationRoutes(router: Router, { gate, activation, limit }: ActivationRoutesDeps): void {
  router.add({
    method: 'post',
    path: '/api/client/init',
    doc: clientDoc('Open a client session', InitBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.init',
        schema: InitBody,
        limiter: limit('init', 30),
        identifiesBy: 'api_key',
        disabledDetail: 'message',
      },
      (c) => activation.init(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/register',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: clientDoc('Claim a key and create an end user', RegisterBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.register',
        schema: RegisterBody,
        limiter: limit('register', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => activation.register(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/login',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: clientDoc('Log an end user in', LoginBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.login',
        schema: LoginBody,
        limiter: limit('login', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => activation.login(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/license',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: clientDoc('Activate a license key without an account', LicenseBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.license',
        schema: LicenseBody,
        limiter: limit('license', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => activation.license(c),
    ),
  });
  // docs/protocol.md 12.4, 12.5: the gate and the rate-limit bucket of `license`.
  router.add({
    method: 'post',
    path: '/api/client/trial',
    doc: clientDoc("Start this device's trial (once per HWID and application)", TrialBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.trial',
        schema: TrialBody,
        limiter: limit('license', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => activation.trial(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/offline',
    doc: clientDoc('An offline license file for this machine', OfflineBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.offline',
        schema: OfflineBody,
        limiter: limit('license', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => activation.offline(c),
    ),
  });
}
