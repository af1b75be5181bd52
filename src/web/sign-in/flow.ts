// The one sign-in flow of the server's pages, for the OAuth sign-in page and the account page
// alike: identify and password, then a second factor when the account has one, then the device
// remembers the sign-in. A passkey alone is both steps, except that the first passkey sign-in
// after a password change or reset also asks for the new password. Steps in between are held
// server-side (held.ts). Every answer is a value the page renders; nothing here reads a request.
//
// One rule for a remembered sign-in (signedIn): recent enough, made under the account's current
// credential generation (no password change or reset since), and, when the account has a second
// factor, one that included it (a sign-in made before the factor existed no longer counts).
// A fresh password confirmation (passwordFresh) is a password given here recently: a passkey
// alone never counts as one.
import type { Config } from '../../config.js'
import type { Db } from '../../db/index.js'
import type { Mailer } from '../../mail/index.js'
import { login, type LoginBudget } from '../../account/login.js'
import { getAccount, type AccountRow } from '../../account/store.js'
import {
  checkSecondFactor,
  confirmPasskey,
  factorsOf,
  needsSecondFactor,
  passkeyCurrent,
  sendEmailCode,
  signInWithPasskey,
  type AuthenticationResponseJSON,
  type SecondFactorInput,
} from '../../account/factors/index.js'
import { XRPCError } from '@atproto/xrpc-server'
import { rememberAccount, signedInAccount, type DeviceAccount, type Proof } from '../devices.js'
import { claimMail, dropStep, heldStep, hold, stepFailed, takeStep, type HeldStep, type Place } from './held.js'

export type { Place, HeldStep } from './held.js'

/** a remembered account's sign-in on a device counts this long before the password is asked again */
export const REMEMBERED_MAX_S = 7 * 24 * 3600
export type FlowDeps = { db: Db; config: Config; mailer: Mailer }

/** what mailing a sign-in code came to, for the page to say */
export type Mailed = 'sent' | 'none' | 'tooSoon' | 'down' | { retryAfterS: number }

/** where a sign-in stands after a step */
export type Outcome =
  /** signed in on the device (recorded) */
  | { kind: 'signedIn'; account: AccountRow }
  /** a correct password is held; the account's second factor is awaited */
  | { kind: 'factor'; account: AccountRow; mailed: Mailed }
  /** a passkey is held; the password is awaited, the first time since a password change */
  | { kind: 'password'; account: AccountRow }
  /** wrong handle or password, unknown passkey, wrong code; `account` when it is known */
  | { kind: 'refused'; why: 'invalid' | 'takendown' | 'codeExpired' | 'noAnswer'; account?: AccountRow }
  /** the held step is gone: expired, taken, ended by a password change, or too many wrong answers */
  | { kind: 'restart'; why: 'expired' | 'tooManyWrong'; account?: AccountRow }
  | { kind: 'rateLimited'; retryAfterS: number; account?: AccountRow }

const gone = (a: AccountRow | undefined): a is undefined => !a || a.status === 'takendown' || a.status === 'deleted'

/** the device's remembered sign-in of `did` when it still counts (the rule above) */
export async function signedIn(
  db: Db,
  deviceId: string,
  did: string,
  maxAgeS: number,
): Promise<{ session: DeviceAccount; account: AccountRow } | undefined> {
  const session = await signedInAccount(db, deviceId, did, maxAgeS)
  if (!session) return undefined
  const account = await getAccount(db, did)
  if (gone(account)) return undefined
  if (!session.factorGiven && needsSecondFactor(await factorsOf(db, did))) return undefined
  return { session, account }
}

/** whether a password was given for the signed-in `did` on the device within `withinS` */
export const passwordFresh = (s: DeviceAccount, withinS: number) => !!s.passwordAt && Date.parse(s.passwordAt) > Date.now() - withinS * 1000

export const recordSignIn = async (db: Db, at: Place, account: AccountRow, proof: Proof): Promise<Outcome> => {
  await rememberAccount(db, at.deviceId, account.did, proof)
  return { kind: 'signedIn', account }
}

/** the first step: identifier and main password (never an app password) */
export async function passwordStep(
  deps: FlowDeps,
  at: Place,
  input: { identifier: string; password: string; remember: boolean },
  budget: LoginBudget,
): Promise<Outcome> {
  const { db } = deps
  const result = await login(db, { identifier: input.identifier, password: input.password, appPasswords: false, budget })
  if (!result.ok)
    return result.why === 'rateLimited' ? { kind: 'rateLimited', retryAfterS: result.retryAfterS } : { kind: 'refused', why: result.why }
  const account = result.account
  // a password given anew replaces whatever was held here before
  await dropStep(db, at)
  if (!needsSecondFactor(await factorsOf(db, account.did)))
    return recordSignIn(db, at, account, { remember: input.remember, password: true, factor: false })
  const step = await hold(db, at, { did: account.did, remember: input.remember, awaits: 'factor' })
  return { kind: 'factor', account, mailed: await mailCode(deps, step, true) }
}

/** the held step at the place, with its account, while it is live */
export async function held(db: Db, at: Place): Promise<{ step: HeldStep; account: AccountRow } | undefined> {
  const step = await heldStep(db, at)
  const account = step && (await getAccount(db, step.did))
  return step && !gone(account) ? { step, account } : undefined
}

/** the second factor of the held password: a code, or a passkey as the second factor */
export async function factorStep(deps: FlowDeps, at: Place, input: SecondFactorInput, budget: LoginBudget): Promise<Outcome> {
  const { db } = deps
  const h = await held(db, at)
  if (!h || h.step.awaits !== 'factor') return { kind: 'restart', why: 'expired' }
  const { step, account } = h
  const result = await checkSecondFactor(deps, step.did, input, { budget })
  if (result.ok) {
    if (!(await takeStep(db, step))) return { kind: 'restart', why: 'expired', account }
    // password and passkey together: the passkey is confirmed under the current password
    if (result.factor === 'passkey') await confirmPasskey(db, step.did, result.passkeyId)
    return recordSignIn(db, at, account, { remember: step.remember, password: true, factor: true })
  }
  if (result.why === 'rateLimited') return { kind: 'rateLimited', retryAfterS: result.retryAfterS, account }
  if (!(await stepFailed(db, step))) return { kind: 'restart', why: 'tooManyWrong', account }
  return { kind: 'refused', why: result.why === 'expired' ? 'codeExpired' : 'invalid', account }
}

/** a passkey with no handle and no password: both steps, unless a password change came since its last confirmation */
export async function passkeyStep(
  deps: FlowDeps,
  at: Place,
  response: AuthenticationResponseJSON | undefined,
  remember: boolean,
): Promise<Outcome> {
  const { db } = deps
  if (!response) return { kind: 'refused', why: 'noAnswer' }
  const result = await signInWithPasskey(deps, response)
  if (!result.ok) return { kind: 'refused', why: result.why }
  await dropStep(db, at)
  if (!(await passkeyCurrent(db, result.passkeyId))) {
    await hold(db, at, { did: result.account.did, remember, awaits: 'password', passkeyId: result.passkeyId })
    return { kind: 'password', account: result.account }
  }
  // a passkey is a second factor but no password: it never counts as a password confirmation
  return recordSignIn(db, at, result.account, { remember, password: false, factor: true })
}

/** the account's password after a passkey that predates a password change */
export async function passwordAfterPasskey(deps: FlowDeps, at: Place, password: string, budget: LoginBudget): Promise<Outcome> {
  const { db } = deps
  const h = await held(db, at)
  if (!h || h.step.awaits !== 'password' || !h.step.passkeyId) return { kind: 'restart', why: 'expired' }
  const { step, account } = h
  const result = await login(db, { identifier: account.handle, password, appPasswords: false, budget })
  if (!result.ok || result.account.did !== account.did) {
    if (!result.ok && result.why === 'rateLimited') return { kind: 'rateLimited', retryAfterS: result.retryAfterS, account }
    if (!(await stepFailed(db, step))) return { kind: 'restart', why: 'tooManyWrong', account }
    return { kind: 'refused', why: 'invalid', account }
  }
  if (!(await takeStep(db, step))) return { kind: 'restart', why: 'expired', account }
  await confirmPasskey(db, account.did, step.passkeyId!)
  return recordSignIn(db, at, account, { remember: step.remember, password: true, factor: true })
}

/**
 * the main password of a signed-in account given again (a sensitive change on the account page):
 * the device's sign-in is renewed with the second factor its sign-in had
 */
export async function confirmPassword(
  deps: FlowDeps,
  at: Place,
  account: AccountRow,
  input: { password: string; remember: boolean },
  budget: LoginBudget,
): Promise<Outcome> {
  const result = await checkPassword(deps, account, input.password, budget)
  if (result.kind !== 'signedIn') return result
  return recordSignIn(deps.db, at, account, { remember: input.remember, password: true, factor: 'keep' })
}

/** the main password of `account`, on the login budget; nothing recorded */
export async function checkPassword(deps: FlowDeps, account: AccountRow, password: string, budget: LoginBudget): Promise<Outcome> {
  const result = await login(deps.db, { identifier: account.handle, password, appPasswords: false, budget })
  if (result.ok && result.account.did === account.did) return { kind: 'signedIn', account }
  if (!result.ok && result.why === 'rateLimited') return { kind: 'rateLimited', retryAfterS: result.retryAfterS, account }
  return { kind: 'refused', why: 'invalid', account }
}

/** "email me a new code" at the held step */
export async function resendCode(deps: FlowDeps, at: Place): Promise<Mailed | undefined> {
  const h = await held(deps.db, at)
  if (!h || h.step.awaits !== 'factor') return undefined
  return mailCode(deps, h.step, false)
}

/** mails a sign-in code for the step when the account uses them */
async function mailCode(deps: FlowDeps, step: HeldStep, first: boolean): Promise<Mailed> {
  const { db } = deps
  const account = await getAccount(db, step.did)
  const factors = await factorsOf(db, step.did)
  if (!account?.email || !factors.emailCode) return 'none'
  if (!(await claimMail(db, step, first))) return 'tooSoon'
  try {
    const sent = await sendEmailCode(deps, { did: account.did, handle: account.handle, email: account.email })
    return sent.sent ? 'sent' : { retryAfterS: sent.retryAfterS }
  } catch (err) {
    if (!(err instanceof XRPCError)) throw err
    return 'down'
  }
}

/** a factor set up by the signed-in owner on this device: its sign-in counts as having it */
export async function factorAddedHere(db: Db, at: Place, account: AccountRow, remember: boolean): Promise<void> {
  await rememberAccount(db, at.deviceId, account.did, { remember, password: false, factor: true })
}
