// Authenticator apps (TOTP, RFC 6238: SHA-1, 6 digits, 30 s). Set-up is two steps: beginTotp
// makes a secret held pending, confirmTotp turns it on once a code from the app proves it was
// scanned. A code is accepted one step either side of now, and never twice: the newest accepted
// step is kept and a code of that step or an earlier one is refused.
import type { Config } from '../../config.js'
import type { Store } from '../../db/schema.js'
import { dropRecoveryCodesIfUnneeded, issueRecoveryCodes } from './recovery.js'
import { seal, unseal } from './sealing.js'
import { noticeCredentialChange, type NoticeDeps } from '../notices.js'

const PERIOD = 30
type Deps = { db: Store; config: Pick<Config, 'secrets' | 'hostname'> }

// both load at first use: most servers' users never set up an authenticator app
const otpauth = () => import('otpauth')
/** the QR code of `uri` as an SVG document */
export const qrSvg = async (uri: string) =>
  (await import('qrcode')).default.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 })

export type TotpSetup = {
  /** base32, for typing into an app by hand */
  secret: string
  /** the otpauth:// URI the QR code carries */
  uri: string
  /** the QR code, an SVG document */
  qrSvg: string
}

/**
 * a new pending secret for `did` (`label`: what the app lists it as, the handle), replacing an
 * unconfirmed one; an app already on stays on until disableTotp
 */
export async function beginTotp(deps: Deps, did: string, label: string): Promise<TotpSetup | { alreadyOn: true }> {
  const { db, config } = deps
  const on = await db.selectFrom('totp').select('did').where('did', '=', did).where('confirmed_at', 'is not', null).executeTakeFirst()
  if (on) return { alreadyOn: true }
  const { Secret, TOTP } = await otpauth()
  const secret = new Secret({ size: 20 })
  const values = {
    secret_sealed: seal(config, did, secret.base32),
    confirmed_at: null,
    last_step: null,
    created_at: new Date().toISOString(),
  }
  await db
    .insertInto('totp')
    .values({ did, ...values })
    .onConflict((oc) => oc.column('did').doUpdateSet(values))
    .execute()
  const uri = new TOTP({ issuer: config.hostname, label, secret, algorithm: 'SHA1', digits: 6, period: PERIOD }).toString()
  return { secret: secret.base32, uri, qrSvg: await qrSvg(uri) }
}

/**
 * the step `code` is for, when it is valid for the secret of `did` (pending or confirmed, as
 * asked) and newer than the last one accepted; that step is then recorded as used
 */
async function acceptStep(deps: Deps, did: string, code: string, pending: boolean): Promise<boolean> {
  const { db, config } = deps
  if (!/^\d{6}$/.test(code)) return false
  const row = await db.selectFrom('totp').selectAll().where('did', '=', did).executeTakeFirst()
  if (!row || (row.confirmed_at === null) !== pending) return false
  const base32 = unseal(config, did, row.secret_sealed)
  if (!base32) return false
  const now = Date.now()
  const { Secret, TOTP } = await otpauth()
  const delta = TOTP.validate({ token: code, secret: Secret.fromBase32(base32), period: PERIOD, timestamp: now, window: 1 })
  if (delta === null) return false
  const step = Math.floor(now / 1000 / PERIOD) + delta
  // the conditional update is the replay check: of two uses of one step, one changes the row
  const res = await db
    .updateTable('totp')
    .set({ last_step: step, ...(pending ? { confirmed_at: new Date(now).toISOString() } : {}) })
    .where('did', '=', did)
    .where('secret_sealed', '=', row.secret_sealed)
    .where((eb) => eb.or([eb('last_step', 'is', null), eb('last_step', '<', step)]))
    .executeTakeFirst()
  return res.numUpdatedRows === 1n
}

/** turns the pending app on when `code` is from it; the fresh recovery codes to show once (earlier ones stop working) */
export async function confirmTotp(
  deps: Deps & NoticeDeps,
  did: string,
  code: string,
): Promise<{ ok: true; recoveryCodes: string[] } | { ok: false }> {
  if (!(await acceptStep(deps, did, code.trim(), true))) return { ok: false }
  const recoveryCodes = await issueRecoveryCodes(deps.db, deps.config, did)
  await noticeCredentialChange(deps, did, { kind: 'totp', change: 'added' })
  return { ok: true, recoveryCodes }
}

/** a current code from the account's authenticator app (on, not pending), each step once */
export function verifyTotp(deps: Deps, did: string, code: string): Promise<boolean> {
  return acceptStep(deps, did, code.replace(/\s/g, ''), false)
}

/** removes the app (pending or on; the owner is told when it was on); recovery codes go too when no passkey is left */
export async function disableTotp(deps: NoticeDeps, did: string): Promise<void> {
  const gone = await deps.db.deleteFrom('totp').where('did', '=', did).returning('confirmed_at').execute()
  await dropRecoveryCodesIfUnneeded(deps.db, did)
  if (gone.some((r) => r.confirmed_at !== null)) await noticeCredentialChange(deps, did, { kind: 'totp', change: 'removed' })
}
