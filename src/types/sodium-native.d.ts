// Minimal typings for the sodium-native calls Keywarden makes (the package ships none).
declare module 'sodium-native' {
  type Buf = Uint8Array;
  export const crypto_sign_PUBLICKEYBYTES: number;
  export const crypto_sign_SECRETKEYBYTES: number;
  export const crypto_sign_SEEDBYTES: number;
  export const crypto_sign_BYTES: number;
  export const crypto_pwhash_STRBYTES: number;
  export const crypto_pwhash_OPSLIMIT_INTERACTIVE: number;
  export const crypto_pwhash_MEMLIMIT_INTERACTIVE: number;
  export function randombytes_buf(out: Buf): void;
  export function sodium_memcmp(a: Buf, b: Buf): boolean;
  export function crypto_sign_seed_keypair(pk: Buf, sk: Buf, seed: Buf): void;
  export function crypto_sign_detached(sig: Buf, m: Buf, sk: Buf): void;
  export function crypto_sign_verify_detached(sig: Buf, m: Buf, pk: Buf): boolean;
  export function crypto_pwhash_str_async(out: Buf, passwd: Buf, opslimit: number, memlimit: number): Promise<void>;
  export function crypto_pwhash_str_verify_async(str: Buf, passwd: Buf): Promise<boolean>;
  const sodium: {
    crypto_sign_PUBLICKEYBYTES: number;
    crypto_sign_SECRETKEYBYTES: number;
    crypto_sign_SEEDBYTES: number;
    crypto_sign_BYTES: number;
    crypto_pwhash_STRBYTES: number;
    crypto_pwhash_OPSLIMIT_INTERACTIVE: number;
    crypto_pwhash_MEMLIMIT_INTERACTIVE: number;
    randombytes_buf: typeof randombytes_buf;
    sodium_memcmp: typeof sodium_memcmp;
    crypto_sign_seed_keypair: typeof crypto_sign_seed_keypair;
    crypto_sign_detached: typeof crypto_sign_detached;
    crypto_sign_verify_detached: typeof crypto_sign_verify_detached;
    crypto_pwhash_str_async: typeof crypto_pwhash_str_async;
    crypto_pwhash_str_verify_async: typeof crypto_pwhash_str_verify_async;
  };
  export default sodium;
}
