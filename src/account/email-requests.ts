// The mails an account asks for about itself, for the XRPC methods and the account page alike:
// confirming its address, approving a change of address, and deleting the account. Each stores a
// fresh token (replacing an earlier one of the same purpose) and mails it.
import { xrpcError } from '../errors.js'
import { deliver, type Mailer } from '../mail/index.js'
import { confirmEmailMail, deleteAccountMail, updateEmailMail } from '../mail/templates.js'
import type { Store } from '../db/schema.js'
import { issueEmailToken } from './email-tokens.js'
import { checkEmail } from './handles.js'

type Deps = { db: Store; mailer: Mailer }
type Account = { did: string; handle: string; email: string | null; email_confirmed_at: string | null }

/** a confirm-email token to the current address; false (nothing sent) when it is confirmed already */
export async function sendEmailConfirmation({ db, mailer }: Deps, account: Account): Promise<boolean> {
  if (account.email_confirmed_at) return false
  if (!account.email) throw xrpcError('InvalidRequest', 'This account has no email address')
  const token = await issueEmailToken(db, account.did, 'confirm-email')
  await deliver(mailer, { to: account.email, ...confirmEmailMail(token, account.handle) })
  return true
}

/**
 * a token carrying `wanted`: whoever holds the address on file approves the change, so it goes to
 * the current address when that one is confirmed, else to the new one. Returns where it went.
 */
export async function requestEmailChange({ db, mailer }: Deps, account: Account, wanted: string): Promise<string> {
  const newEmail = checkEmail(wanted)
  const token = await issueEmailToken(db, account.did, 'update-email', { newEmail })
  const to = account.email && account.email_confirmed_at ? account.email : newEmail
  await deliver(mailer, { to, ...updateEmailMail(token, account.handle, newEmail) })
  return to
}

/** the official flow without a new address: a token to the confirmed address; false when unconfirmed */
export async function sendEmailUpdateToken({ db, mailer }: Deps, account: Account): Promise<boolean> {
  if (!account.email_confirmed_at) return false
  if (!account.email) throw xrpcError('InvalidRequest', 'This account has no email address')
  const token = await issueEmailToken(db, account.did, 'update-email')
  await deliver(mailer, { to: account.email, ...updateEmailMail(token, account.handle) })
  return true
}

/** a delete-account token to the account's address */
export async function sendDeleteToken({ db, mailer }: Deps, account: Account): Promise<void> {
  if (!account.email) throw xrpcError('InvalidRequest', 'This account has no email address')
  const token = await issueEmailToken(db, account.did, 'delete-account')
  await deliver(mailer, { to: account.email, ...deleteAccountMail(token, account.handle) })
}
