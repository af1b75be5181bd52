// Email sign-in codes (the official `emailAuthFactor`): with the factor on, a password sign-in
// also needs a code mailed to the account's confirmed address. One live code per account, 15
// minutes, single use; five wrong tries end it, and at most five are mailed an hour.
import type { Config } from '../../config.js'
import type { Store } from '../../db/schema.js'
import { deliver, type Mailer } from '../../mail/index.js'
import { signInCodeMail } from '../../mail/templates.js'
import { codeHash, newCode, normalizeCode, sameHash } from './sealing.js'

const MINUTE = 60_000
export const SIGN_IN_CODE_TTL_MS = 15 * MINUTE
const MAX_FAILURES = 5
const SEND_WINDOW_MS = 60 * MINUTE
const SENDS_PER_WINDOW = 5

export type SendResult = { sent: true } | { sent: false; retryAfterS: number }

/** mails a fresh code to `account.email`, replacing any earlier one; refused while the hour's sends are spent */
export async function sendEmailCode(
  deps: { db: Store; config: Pick<Config, 'secrets'>; mailer: Mailer },
  account: { did: string; handle: string; email: string },
): Promise<SendResult> {
  const { db, config, mailer } = deps
  const now = Date.now()
  const prior = await db.selectFrom('sign_in_code').selectAll().where('did', '=', account.did).executeTakeFirst()
  const windowStart = prior ? Date.parse(prior.window_started_at) : 0
  const inWindow = now - windowStart < SEND_WINDOW_MS
  if (prior && inWindow && prior.sends >= SENDS_PER_WINDOW) {
    return { sent: false, retryAfterS: Math.ceil((windowStart + SEND_WINDOW_MS - now) / 1000) }
  }
  const code = newCode()
  const values = {
    code_hash: codeHash(config, account.did, code),
    expires_at: new Date(now + SIGN_IN_CODE_TTL_MS).toISOString(),
    failures: 0,
    sends: inWindow && prior ? prior.sends + 1 : 1,
    window_started_at: inWindow && prior ? prior.window_started_at : new Date(now).toISOString(),
  }
  await db
    .insertInto('sign_in_code')
    .values({ did: account.did, ...values })
    .onConflict((oc) => oc.column('did').doUpdateSet(values))
    .execute()
  await deliver(mailer, { to: account.email, ...signInCodeMail(code, account.handle) })
  return { sent: true }
}

export type CodeCheck = 'ok' | 'invalid' | 'expired'

/** spends the live code of `did` when `code` is it; a wrong one counts toward ending it */
export async function checkEmailCode(db: Store, config: Pick<Config, 'secrets'>, did: string, code: string): Promise<CodeCheck> {
  const row = await db.selectFrom('sign_in_code').selectAll().where('did', '=', did).executeTakeFirst()
  if (!row || row.failures >= MAX_FAILURES) return 'invalid'
  const given = codeHash(config, did, code)
  if (!sameHash(row.code_hash, given) || normalizeCode(code).length !== 10) {
    await db
      .updateTable('sign_in_code')
      .set((eb) => ({ failures: eb('failures', '+', 1) }))
      .where('did', '=', did)
      .where('code_hash', '=', row.code_hash)
      .execute()
    return 'invalid'
  }
  // the send counters stay, so using a code does not reset the hour's mail budget
  const taken = await db
    .updateTable('sign_in_code')
    .set({ code_hash: '', failures: MAX_FAILURES })
    .where('did', '=', did)
    .where('code_hash', '=', row.code_hash)
    .where('failures', '<', MAX_FAILURES)
    .executeTakeFirst()
  if (taken.numUpdatedRows !== 1n) return 'invalid'
  return Date.parse(row.expires_at) > Date.now() ? 'ok' : 'expired'
}
