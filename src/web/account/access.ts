// The account page's actions that manage access: connected apps, app passwords, the email
// address, the handle and the password. Each is a row (web/rows.ts); every rule is the domain
// module's own, shared with the XRPC methods.
import { XRPCError } from '@atproto/xrpc-server'
import { createAppPassword, revokeAppPassword } from '../../account/app-passwords.js'
import { changeEmail, confirmEmail } from '../../account/email.js'
import { requestEmailChange, sendEmailConfirmation } from '../../account/email-requests.js'
import { checkHandleFree, validateHandle } from '../../account/handles.js'
import { changePassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../account/password.js'
import { setHandle } from '../../identity/amend.js'
import { endClientGrants } from '../../account/revocation.js'
import { OAUTH_ACCESS_TTL_S } from '../../oauth/tokens.js'
import { rememberAccount } from '../devices.js'
import * as flow from '../sign-in/flow.js'
import { action, done, wrongPassword, type AccountKit, type AccountRowDef } from './kit.js'

// what a deactivated account may still do here: take access away
const WHILE_DEACTIVATED = { statuses: ['active', 'deactivated'] } as const

export function accessRows(kit: AccountKit): AccountRowDef[] {
  const { deps } = kit
  const { db, config } = deps

  return [
    action(
      'apps/revoke',
      'signed-in',
      'apps',
      async ({ account, fields: f }) => {
        const ended = f.client_id ? await endClientGrants(db, account.did, f.client_id, OAUTH_ACCESS_TTL_S) : 0
        return ended ? { notice: 'The app was signed out and can no longer use your account.' } : { error: 'That app was not connected.' }
      },
      WHILE_DEACTIVATED,
    ),
    action('app-passwords/create', 'fresh-password', 'app-passwords', async ({ account, fields: f }) => {
      const made = await createAppPassword(deps, account.did, (f.name ?? '').trim(), f.privileged === 'on')
      return { appPassword: { name: made.name, password: made.password, privileged: made.privileged } }
    }),
    action(
      'app-passwords/revoke',
      'signed-in',
      'app-passwords',
      async ({ account, fields: f }) => {
        await revokeAppPassword(db, account.did, f.name ?? '')
        return { notice: `The app password ${f.name ?? ''} was revoked; apps using it are signed out.` }
      },
      WHILE_DEACTIVATED,
    ),

    // mails spend the budget the XRPC methods that send them share
    action(
      'email/send-confirmation',
      'signed-in',
      'email',
      async ({ account }) => {
        const sent = await sendEmailConfirmation(deps, account)
        return { notice: sent ? `We sent a confirmation code to ${account.email}.` : 'The address is already confirmed.' }
      },
      { rate: 'email' },
    ),
    action('email/confirm', 'signed-in', 'email', async ({ account, fields: f }) => {
      await confirmEmail(db, account.did, (f.token ?? '').trim())
      return { notice: 'Your email address is confirmed.' }
    }),
    action(
      'email/change-request',
      'fresh-password',
      'email',
      async ({ account, fields: f }) => {
        const to = await requestEmailChange(deps, account, f.email ?? '')
        return { notice: `We sent a code to ${to}. Enter it below to change the address.` }
      },
      { rate: 'email' },
    ),
    action('email/change', 'fresh-password', 'email', async ({ account, fields: f }) => {
      if (!f.token?.trim()) return { error: 'Enter the code from the email.' }
      await changeEmail(deps, account.did, { token: f.token.trim(), email: '' })
      return { notice: 'Your email address was changed. Confirm the new address to use it for sign-in codes.' }
    }),

    action('handle', 'fresh-password', 'handle', async ({ account, fields: f }) => {
      const own = f.kind === 'own'
      let handle: string
      if (own) {
        handle = (f.domain ?? '').trim().toLowerCase().replace(/^@/, '')
      } else {
        const name = (f.name ?? '').trim().toLowerCase().replace(/^@/, '')
        const domain = config.handleDomains.includes(f.domain ?? '') ? f.domain! : config.handleDomains[0]
        handle = `${name}${domain.startsWith('.') ? '' : '.'}${domain}`
      }
      try {
        const valid = await validateHandle({ config, outbound: deps.outbound }, handle, account.did)
        await checkHandleFree(db, account.did, valid)
        await setHandle(db, account.did, valid, { rotationKey: deps.rotationKey, plcUrl: config.plcUrl })
        return { notice: `Your handle is now @${valid}.` }
      } catch (err) {
        if (!(err instanceof XRPCError)) throw err
        // the records to publish stay on the page, naming the domain that was tried
        return done({ error: err.message, ...(own ? { ownDomain: handle } : {}) }, 'handle')
      }
    }),

    // the current password is itself the confirmation, on the login budget
    action(
      'password',
      'signed-in',
      'password',
      async ({ device, account, session, fields: f, budget }) => {
        const wrong = wrongPassword(await flow.checkPassword(deps, account, f.current ?? '', budget))
        if (wrong) return wrong
        const next = f.password ?? ''
        if (next.length < MIN_PASSWORD_LENGTH) return { error: `Passwords are at least ${MIN_PASSWORD_LENGTH} characters.` }
        if (next.length > MAX_PASSWORD_LENGTH) return { error: `Passwords are at most ${MAX_PASSWORD_LENGTH} characters.` }
        await changePassword(deps, account.did, next, 'owner')
        // every session ended, this device's too: it stays signed in, having just shown the
        // password, with the second factor its sign-in had
        await rememberAccount(db, device.id, account.did, { remember: session.remember, password: true, factor: session.factorGiven })
        return { notice: 'Your password was changed. Every other session was signed out.' }
      },
      { rate: 'login' },
    ),
  ]
}
