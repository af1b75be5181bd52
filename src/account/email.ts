// Changes to an account's email address: confirming it, changing it by the account or the
// operator, and finding the account a password reset is for.
import type { Db } from '../db/index.js'
import { isUniqueViolation } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { consumeEmailToken } from './email-tokens.js'
import { checkEmail } from './handles.js'
import { noticeCredentialChange, type CredentialChange, type NoticeDeps } from './notices.js'

export type EmailDeps = NoticeDeps & { db: Db }

const notAvailable = () => xrpcError('EmailNotAvailable', 'This email address is already in use')

/** consumes the confirm-email token and marks the address confirmed; a miss is 401 InvalidToken */
export async function confirmEmail(db: Db, did: string, token: string): Promise<void> {
  await db.transact(async (trx) => {
    const hit = await consumeEmailToken(trx, did, 'confirm-email', token)
    if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 401)
    await trx.updateTable('account').set({ email_confirmed_at: new Date().toISOString() }).where('did', '=', did).execute()
  })
}

/**
 * the account's own change: with `token`, the address the update-email token carries (or `email`
 * for a token issued without one); the new address is unconfirmed and turns email sign-in codes
 * off, and one in use leaves the token in place. The same address again keeps its confirmation:
 * that is how `emailAuthFactor` is switched (on only for a confirmed address, which also means
 * only with a token from requestEmailUpdate). The owner is told, at the address it had.
 */
export async function changeEmail(
  deps: EmailDeps,
  did: string,
  change: { token?: string; email: string; emailAuthFactor?: boolean },
): Promise<void> {
  const { db } = deps
  let notice: CredentialChange | undefined
  try {
    await db.transact(async (trx) => {
      const current = await trx
        .selectFrom('account')
        .select(['email', 'email_confirmed_at', 'email_auth_factor'])
        .where('did', '=', did)
        .executeTakeFirstOrThrow()
      let newEmail: string | undefined
      if (change.token) {
        const hit = await consumeEmailToken(trx, did, 'update-email', change.token)
        if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 400)
        newEmail = hit.new_email ?? undefined
      }
      newEmail ??= checkEmail(change.email)
      if (newEmail === current.email) {
        if (change.emailAuthFactor === undefined) return
        if (change.emailAuthFactor && !current.email_confirmed_at) throw needsConfirmed()
        await trx
          .updateTable('account')
          .set({ email_auth_factor: change.emailAuthFactor ? 1 : 0 })
          .where('did', '=', did)
          .execute()
        if (!!current.email_auth_factor !== change.emailAuthFactor) notice = { kind: 'email-codes', on: change.emailAuthFactor }
        return
      }
      if (change.emailAuthFactor) throw needsConfirmed()
      await trx
        .updateTable('account')
        .set({ email: newEmail, email_confirmed_at: null, email_auth_factor: 0 })
        .where('did', '=', did)
        .execute()
      if (current.email) notice = { kind: 'email', from: current.email, to: newEmail, by: 'owner' }
    })
  } catch (err) {
    if (isUniqueViolation(err, 'account_email_uq')) throw notAvailable()
    throw err
  }
  if (notice) await noticeCredentialChange(deps, did, notice)
}

const needsConfirmed = () =>
  xrpcError('InvalidRequest', 'Email sign-in codes need a confirmed email address: confirm the address first, then turn them on')

/** the operator's change: the address counts as unconfirmed, and tokens sent to the old one are dropped; the old one is told */
export async function setEmail(deps: EmailDeps, did: string, email: string): Promise<void> {
  const { db } = deps
  const before = await db.selectFrom('account').select('email').where('did', '=', did).executeTakeFirst()
  const taken = await db.selectFrom('account').select('did').where('email', '=', email).executeTakeFirst()
  if (taken && taken.did !== did) throw notAvailable()
  try {
    await db.transact(async (trx) => {
      await trx.updateTable('account').set({ email, email_confirmed_at: null, email_auth_factor: 0 }).where('did', '=', did).execute()
      await trx.deleteFrom('email_token').where('did', '=', did).execute()
    })
  } catch (err) {
    if (isUniqueViolation(err, 'account_email_uq')) throw notAvailable()
    throw err
  }
  if (before?.email && before.email !== email)
    await noticeCredentialChange(deps, did, { kind: 'email', from: before.email, to: email, by: 'operator' })
}

/**
 * the live account with address `email`, or undefined; a miss makes the same one store round trip
 * a hit's token write costs, so timing does not tell them apart
 */
export async function passwordResetAccount(db: Db, email: string) {
  const account = await db.selectFrom('account').select(['did', 'handle', 'email', 'status']).where('email', '=', email).executeTakeFirst()
  if (account?.email && account.status !== 'deleted') return { did: account.did, handle: account.handle, email: account.email }
  await db.deleteFrom('email_token').where('did', '=', '').where('purpose', '=', 'reset-password').execute()
  return undefined
}
