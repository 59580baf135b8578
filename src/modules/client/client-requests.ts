// The client API's request bodies, as TypeBox schemas: the routes validate requests and write
// OpenAPI with them, services take their Static<> types, so each shape is written once.
// Client endpoints ignore unknown fields (docs/protocol.md 1): no additionalProperties: false here.
import { Type, type Static } from '@sinclair/typebox';
import { PlainLine } from '../../platform/http/validation.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
const Session = Type.String({ minLength: 1, maxLength: 128 });
// docs/protocol.md 11.38: a HWID is plain text, so look-alike spellings cannot be new devices.
const Hwid = PlainLine(8, 256);
const InitIv = Type.Optional(Str(0, 64));
// 3 MiB of image as base64 (4 MiB) plus a data: prefix and line breaks; the image itself is checked after.
const Screenshot = Type.Optional(Type.String({ maxLength: 5 * 1024 * 1024 }));
const Username = Str(1, 64);
// Byte length (<= 72 UTF-8 bytes) is checked after the schema; this caps the characters.
const Password = Str(1, 72);

export const InitBody = Type.Object({
  api_key: Str(1, 128),
  version: Type.Optional(Str(1, 64)),
  enc_key: Type.Optional(Str(0, 35)),
  init_iv: InitIv,
  binary_hash: Type.Optional(Str(0, 128)),
  binary_token: Type.Optional(Str(0, 128)),
  binary_token_hash: Type.Optional(Str(0, 128)),
});
export const RegisterBody = Type.Object({
  session: Session,
  username: Username,
  password: Password,
  license: Str(1, 256),
  hwid: Hwid,
  screenshot: Screenshot,
  init_iv: InitIv,
});
export const LoginBody = Type.Object({
  session: Session,
  username: Username,
  password: Password,
  hwid: Hwid,
  screenshot: Screenshot,
  init_iv: InitIv,
});
export const LicenseBody = Type.Object({
  session: Session,
  license: Str(1, 256),
  hwid: Hwid,
  screenshot: Screenshot,
  init_iv: InitIv,
});
/** docs/protocol.md 12.4 and 12.5: a trial, and an offline license file, for this HWID. */
export const TrialBody = Type.Object({ session: Session, hwid: Hwid, init_iv: InitIv });
export const OfflineBody = Type.Object({ session: Session, hwid: Hwid, init_iv: InitIv });
export const StartBody = Type.Object({ session: Session, system_id: Str(8, 128) });
export const BeatBody = Type.Object({
  session: Session,
  token: Type.String({ maxLength: 256 }),
  system_id: Str(8, 128),
  beat_index: Type.Integer({ minimum: 1, maximum: 2 ** 31 }),
  code_hash: Type.Optional(Str(8, 128)),
  code_size: Type.Optional(Type.Integer({ minimum: 0 })),
  debugger_detected: Type.Optional(Type.Boolean()),
});
export const StopBody = Type.Object({ session: Session, token: Type.String({ maxLength: 256 }) });

export type InitRequest = Static<typeof InitBody>;
export type RegisterRequest = Static<typeof RegisterBody>;
export type LoginRequest = Static<typeof LoginBody>;
export type LicenseRequest = Static<typeof LicenseBody>;
export type TrialRequest = Static<typeof TrialBody>;
export type OfflineRequest = Static<typeof OfflineBody>;
export type StartRequest = Static<typeof StartBody>;
export type BeatRequest = Static<typeof BeatBody>;
export type StopRequest = Static<typeof StopBody>;
