// Team password policy (docs/spec.md "Password policy": min 8, more enforced server-side). Ours:
// 8-128 characters, at least one letter and one character that is not a letter, and not the
// username. Violations are 422s on the `password` field.
import { validationError } from '../../errors.js';

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;

export function passwordProblem(password: string, username?: string): string | undefined {
  if (password.length < PASSWORD_MIN) return `Password must be at least ${PASSWORD_MIN} characters`;
  if (password.length > PASSWORD_MAX) return `Password must be at most ${PASSWORD_MAX} characters`;
  if (!/\p{L}/u.test(password) || !/[^\p{L}]/u.test(password))
    return 'Password must contain a letter and a digit or symbol';
  if (username && password.toLowerCase() === username.toLowerCase()) return 'Password must not be the username';
  return undefined;
}

export function assertPasswordPolicy(password: string, username?: string, field = 'password'): void {
  const problem = passwordProblem(password, username);
  if (problem) throw validationError(field, problem, 'password_policy');
}
