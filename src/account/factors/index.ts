// Second factors of an account, one surface for every caller: createSession (XRPC), the OAuth
// sign-in page and the account page. Kinds: email sign-in codes (the official `emailAuthFactor`),
// an authenticator app (TOTP) with recovery codes, and passkeys. App passwords skip all of them.
import type { Config } from '../../config.js'
import type { Store } from '../../db/schema.js'
import type { Mailer } from '../../mail/index.js'
import type { LoginBudget } from '../login.js'
import { checkEmailCode } from './email-code.js'
import { verifyPasskeyAuthentication, type AuthenticationResponseJSON } from './passkeys.js'
import { recoveryCodesLeft, useRecoveryCode } from './recovery.js'
import { verifyTotp } from './totp.js'
import { getAccount, type AccountRow } from '../store.js'
import { noticeCredentialChange, type NoticeDeps } from '../notices.js'

export { sendEmailCode, SIGN_IN_CODE_TTL_MS, type SendResult } from './email-code.js'
export { beginTotp, confirmTotp, disableTotp, qrSvg, verifyTotp, type TotpSetup } from './totp.js'
export { issueRecoveryCodes, RECOVERY_CODE_COUNT } from './recovery.js'
export {
  listPasskeys,
  passkeyAuthenticationOptions,
  passkeyRegistrationOptions,
  removePasskey,
  renamePasskey,
  verifyPasskeyAuthentication,
  verifyPasskeyRegistration,
  passkeyCurrent,
  confirmPasskey,
  type AuthenticationResponseJSON,
  type Passkey,
  type RegistrationResponseJSON,
  type RegistrationResult,
} from './passkeys.js'

/** what every function here needs: the store, the configuration (keys, public URL), the mailer */
export type FactorDeps = { db: Store; config: Config; mailer: Mailer }

export type Factors = {
  /** a code mailed at each password sign-in (on only with a confirmed address) */
  emailCode: boolean
  /** an authenticator app, set up and confirmed */
  totp: boolean
  passkeys: number
  recoveryCodesLeft: number
}

export async function factorsOf(db: Store, did: string): Promise<Factors> {
  const account = await db
    .selectFrom('account')
    .select(['email', 'email_confirmed_at', 'email_auth_factor'])
    .where('did', '=', did)
    .executeTakeFirst()
  const totp = await db.selectFrom('totp').select('did').where('did', '=', did).where('confirmed_at', 'is not', null).executeTakeFirst()
  const passkeys = await db
    .selectFrom('passkey')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('did', '=', did)
    .executeTakeFirst()
  return {
    emailCode: !!account?.email && !!account.email_confirmed_at && account.email_auth_factor === 1,
    totp: !!totp,
    passkeys: Number(passkeys?.n ?? 0),
    recoveryCodesLeft: await recoveryCodesLeft(db, did),
  }
}

/** whether a main-password sign-in of an account with these factors needs a second step */
export const needsSecondFactor = (f: Factors) => f.emailCode || f.totp || f.passkeys > 0

export type SecondFactorInput =
  /** whatever the person typed into one code field: tried as each kind of code the account has */
  | { code: string }
  | { emailCode: string }
  | { totp: string }
  | { recoveryCode: string }
  /** the browser's answer to passkeyAuthenticationOptions(deps, did) */
  | { passkeyResponse: AuthenticationResponseJSON }

export type SecondFactorResult =
  | { ok: true; factor: 'emailCode' | 'totp' | 'recoveryCode' }
  | { ok: true; factor: 'passkey'; passkeyId: string }
  /** invalid: wrong, used or not this account's; expired: the right email code, too late */
  | { ok: false; why: 'invalid' | 'expired' }
  | { ok: false; why: 'rateLimited'; retryAfterS: number }

/**
 * checks one second factor of `did`, spending it (codes are single use, a TOTP step is used once).
 * `budget`: callers outside XRPC routes pass the login budgets; each check costs one attempt at the
 * account (by DID, so every spelling of it shares the budget) and one from the address, which is
 * what stops guessing codes.
 */
export async function checkSecondFactor(
  deps: FactorDeps,
  did: string,
  input: SecondFactorInput,
  opts: { budget?: LoginBudget } = {},
): Promise<SecondFactorResult> {
  if (opts.budget) {
    const wait = await opts.budget.attempt(did)
    if (wait !== undefined) return { ok: false, why: 'rateLimited', retryAfterS: wait }
  }
  const { db, config } = deps
  const invalid = { ok: false as const, why: 'invalid' as const }
  if ('passkeyResponse' in input) {
    const hit = await verifyPasskeyAuthentication(deps, input.passkeyResponse, did)
    return hit ? { ok: true, factor: 'passkey', passkeyId: hit.passkeyId } : invalid
  }
  if ('totp' in input) return (await verifyTotp(deps, did, input.totp)) ? { ok: true, factor: 'totp' } : invalid
  if ('recoveryCode' in input)
    return (await useRecoveryCode(db, config, did, input.recoveryCode)) ? { ok: true, factor: 'recoveryCode' } : invalid
  if ('emailCode' in input) return emailResult(await checkEmailCode(db, config, did, input.emailCode))

  const code = input.code.trim()
  const f = await factorsOf(db, did)
  if (/^\d{3}\s?\d{3}$/.test(code)) return f.totp && (await verifyTotp(deps, did, code)) ? { ok: true, factor: 'totp' } : invalid
  if (f.emailCode) {
    const r = await checkEmailCode(db, config, did, code)
    if (r !== 'invalid') return emailResult(r)
  }
  return (await useRecoveryCode(db, config, did, code)) ? { ok: true, factor: 'recoveryCode' } : invalid
}

const emailResult = (r: 'ok' | 'invalid' | 'expired'): SecondFactorResult =>
  r === 'ok' ? { ok: true, factor: 'emailCode' } : { ok: false, why: r }

/**
 * turns email sign-in codes on or off; on needs a confirmed address (false when there is none).
 * Changing the address turns them off (account/email.ts).
 */
export async function setEmailAuthFactor(deps: NoticeDeps, did: string, on: boolean): Promise<boolean> {
  const before = await deps.db.selectFrom('account').select('email_auth_factor').where('did', '=', did).executeTakeFirst()
  let q = deps.db
    .updateTable('account')
    .set({ email_auth_factor: on ? 1 : 0 })
    .where('did', '=', did)
  if (on) q = q.where('email', 'is not', null).where('email_confirmed_at', 'is not', null)
  const changed = (await q.executeTakeFirst()).numUpdatedRows === 1n
  if (changed && before && !!before.email_auth_factor !== on) await noticeCredentialChange(deps, did, { kind: 'email-codes', on })
  return changed
}

/**
 * a password-less sign-in: the account whose passkey answered passkeyAuthenticationOptions(deps)
 * (no DID), judged like a password login: a deleted account is unknown, a taken-down one refused
 */
export async function signInWithPasskey(
  deps: FactorDeps,
  response: AuthenticationResponseJSON,
): Promise<{ ok: true; account: AccountRow; passkeyId: string } | { ok: false; why: 'invalid' | 'takendown' }> {
  const hit = await verifyPasskeyAuthentication(deps, response)
  if (!hit) return { ok: false, why: 'invalid' }
  const account = await getAccount(deps.db, hit.did)
  if (!account || account.status === 'deleted') return { ok: false, why: 'invalid' }
  if (account.status === 'takendown') return { ok: false, why: 'takendown' }
  return { ok: true, account, passkeyId: hit.passkeyId }
}
