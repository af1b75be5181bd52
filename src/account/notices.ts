// The owner hears of every credential added to or changed on the account (a passkey, an app
// password, an authenticator app, the password, the email address): an intruder who plants one is
// then seen at once. Sent from the domain functions, so the XRPC methods and the pages alike send
// it; after the change is stored, in the background: a mail that cannot be sent is logged and never
// undoes or fails what the owner did.
import type { Config } from '../config.js'
import type { Store } from '../db/schema.js'
import type { Logger } from '../logger.js'
import type { Mailer } from '../mail/index.js'
import { credentialChangedMail } from '../mail/templates.js'

export type NoticeDeps = {
  db: Store
  mailer: Mailer
  config: Pick<Config, 'publicUrl'>
  logger?: Logger
  /** a command that exits once done waits for the mail (a server sends in the background) */
  awaitDelivery?: boolean
}

export type CredentialChange =
  | { kind: 'password'; by: 'owner' | 'reset' | 'operator' }
  | { kind: 'passkey'; name: string; change: 'added' | 'removed' }
  | { kind: 'app-password'; name: string; privileged: boolean }
  | { kind: 'totp'; change: 'added' | 'removed' }
  | { kind: 'email-codes'; on: boolean }
  /** sent to the address the account had before the change */
  | { kind: 'email'; from: string; to: string; by: 'owner' | 'operator' }

/** the subject line's few words */
export function headline(c: CredentialChange): string {
  switch (c.kind) {
    case 'password':
      return c.by === 'reset' ? 'password reset' : 'password changed'
    case 'passkey':
      return `passkey ${c.change}`
    case 'app-password':
      return 'app password created'
    case 'totp':
      return `authenticator app ${c.change === 'added' ? 'set up' : 'removed'}`
    case 'email-codes':
      return `email sign-in codes turned ${c.on ? 'on' : 'off'}`
    case 'email':
      return 'email address changed'
  }
}

/** the sentence saying what happened */
export function describeChange(c: CredentialChange): string {
  switch (c.kind) {
    case 'password':
      return c.by === 'operator'
        ? "your account's password was changed by the server's operator"
        : c.by === 'reset'
          ? "your account's password was reset with a code sent to this address"
          : "your account's password was changed"
    case 'passkey':
      return `a passkey named "${printable(c.name)}" was ${c.change === 'added' ? 'added to' : 'removed from'} your account`
    case 'app-password':
      return `${c.privileged ? 'a privileged' : 'an'} app password named "${printable(c.name)}" was created for your account`
    case 'totp':
      return `an authenticator app was ${c.change === 'added' ? 'set up for' : 'removed from'} your account`
    case 'email-codes':
      return `email sign-in codes were turned ${c.on ? 'on' : 'off'} for your account`
    case 'email':
      return c.by === 'operator'
        ? `the server's operator changed your account's email address from ${c.from} to ${c.to}`
        : `your account's email address was changed from ${c.from} to ${c.to}`
  }
}

/** mails the owner about `change` (made at `at`); never throws */
export async function noticeCredentialChange(deps: NoticeDeps, did: string, change: CredentialChange, at = new Date()): Promise<void> {
  try {
    const account = await deps.db.selectFrom('account').select(['handle', 'email']).where('did', '=', did).executeTakeFirst()
    const to = change.kind === 'email' ? change.from : account?.email
    if (!account || !to) return
    const mail = credentialChangedMail(headline(change), describeChange(change), at, account.handle, `${deps.config.publicUrl}/account`)
    const sent = deps.mailer.send({ to, ...mail }).catch((err: unknown) => warn(deps, change, err))
    if (deps.awaitDelivery) await sent
  } catch (err) {
    warn(deps, change, err)
  }
}

function warn(deps: NoticeDeps, change: CredentialChange, err: unknown) {
  deps.logger?.warn({ kind: change.kind, reason: String((err as Error)?.message ?? err) }, 'credential notice not delivered')
}

// names are the owner's (or an intruder's) words: one line, bounded, no control characters
const printable = (name: string) =>
  name
    .replace(/[\p{Cc}\p{Cf}\u2028\u2029]+/gu, ' ')
    .trim()
    .slice(0, 64)
