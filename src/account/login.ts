// Every password check of an account: createSession, the OAuth sign-in form and deleteAccount.
// An unknown identifier costs what a wrong password costs (a burnt hash for each one a known
// account would get), a deleted account answers like an unknown one, and a deactivated one signs in.
import type { AppPasswordClaim } from './session-tokens.js'
import { matchLogin } from './app-passwords.js'
import { burnPasswordCheck, MAX_PASSWORD_LENGTH, verifyPassword } from './password.js'
import { findAccount, type AccountRow } from './store.js'
import type { Store } from '../db/schema.js'

/** the account a password is tried against, as the lookup sees it: `" Alice.test"` is alice.test.
 *  The login budget counts per this key when the identifier names no account (else per its DID). */
export const loginKey = (identifier: string) => identifier.trim().toLowerCase()

/** the login budgets of one request, bound by the page that asks: the seconds to wait when spent */
export type LoginBudget = { attempt(identifier: string): Promise<number | undefined> }

export type LoginAttempt = {
  /** a handle, an email address or a DID */
  identifier: string
  password: string
  /** createSession accepts app passwords; the OAuth sign-in form only the main password */
  appPasswords: boolean
  /**
   * callers that are not XRPC methods spend the login budgets here, before any hashing (an XRPC
   * method spends them through its registry row's rate limit before its handler runs)
   */
  budget?: LoginBudget
  /** a taken-down account signs in too (createSession's allowTakendown) */
  allowTakendown?: boolean
}

export type LoginResult =
  | { ok: true; account: AccountRow; appPassword?: AppPasswordClaim; takendown?: true }
  /** unknown identifier, wrong password or deleted account: one answer for all three */
  | { ok: false; why: 'invalid' }
  | { ok: false; why: 'takendown' }
  | { ok: false; why: 'rateLimited'; retryAfterS: number }

export async function login(db: Store, attempt: LoginAttempt): Promise<LoginResult> {
  const { identifier, password } = attempt
  // bounds the cost of a request before any hashing; nothing to look up in an empty field
  if (!identifier.trim() || !password || password.length > MAX_PASSWORD_LENGTH) return { ok: false, why: 'invalid' }
  if (attempt.budget) {
    const wait = await attempt.budget.attempt(identifier)
    if (wait !== undefined) return { ok: false, why: 'rateLimited', retryAfterS: wait }
  }
  const account = await findAccount(db, identifier)
  let ok = account?.password_hash ? await verifyPassword(password, account.password_hash) : (await burnPasswordCheck(password), false)
  let appPassword: AppPasswordClaim | undefined
  if (!ok && attempt.appPasswords) {
    // then the app passwords, at the cost of one more hash in all
    if (account) appPassword = await matchLogin(db, account, password)
    else await burnPasswordCheck(password)
    ok = !!appPassword
  }
  if (!account || !ok || account.status === 'deleted') return { ok: false, why: 'invalid' }
  if (account.status === 'takendown') {
    // a taken-down owner may still sign in to appeal, with a token only reporting accepts
    return attempt.allowTakendown ? { ok: true, account, appPassword, takendown: true } : { ok: false, why: 'takendown' }
  }
  return { ok: true, account, appPassword }
}

/** a signed-in account proving it is its owner (deleteAccount): the main password, never an app
 *  password; its budget is the registry row's login rate limit, keyed by the account */
export async function checkMainPassword(account: Pick<AccountRow, 'password_hash'>, password: string): Promise<boolean> {
  if (!password || password.length > MAX_PASSWORD_LENGTH || !account.password_hash) return false
  return verifyPassword(password, account.password_hash)
}
