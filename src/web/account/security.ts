// The account page's second factors (email codes, an authenticator app, passkeys, recovery
// codes) and the account's status (deactivate, reactivate, delete), each a row (web/rows.ts).
// A factor the signed-in owner sets up here keeps this device's sign-in; the sign-ins of other
// devices made without it no longer count.
import {
  beginTotp,
  confirmTotp,
  disableTotp,
  factorsOf,
  issueRecoveryCodes,
  passkeyRegistrationOptions,
  removePasskey,
  renamePasskey,
  setEmailAuthFactor,
  verifyPasskeyRegistration,
} from '../../account/factors/index.js'
import { sendDeleteToken } from '../../account/email-requests.js'
import { activate, deactivate, deleteWithToken } from '../../account/lifecycle.js'
import { checkDocNamesUs } from '../../identity/did-control.js'
import { clearCookie } from '../cookies.js'
import { forgetAccount } from '../devices.js'
import { clearSealed, setSealed } from '../sealed.js'
import * as flow from '../sign-in/flow.js'
import { deletedPage } from './views.js'
import {
  action,
  CURRENT,
  json,
  page,
  parseJson,
  PATH,
  TOTP,
  TOTP_SETUP_S,
  wrongPassword,
  type AccountKit,
  type AccountRowDef,
  type ActionContext,
} from './kit.js'

export function securityRows(kit: AccountKit): AccountRowDef[] {
  const { deps } = kit
  const { db, config } = deps
  const addedHere = (c: ActionContext) => flow.factorAddedHere(db, kit.place(c.device), c.account, c.session.remember)

  return [
    action('factors/email', 'fresh-password', 'security', async (c) => {
      const on = c.fields.on === '1'
      if (!(await setEmailAuthFactor(deps, c.account.did, on))) return { error: 'Confirm your email address first.' }
      if (on) await addedHere(c)
      return { notice: on ? 'Email sign-in codes are on.' : 'Email sign-in codes are off.' }
    }),
    action('factors/totp/begin', 'fresh-password', 'security', async ({ res, device, account }) => {
      const setup = await beginTotp(deps, account.did, account.handle)
      if ('alreadyOn' in setup) return { error: 'An authenticator app is already on.' }
      setSealed(res, TOTP, { uri: setup.uri, secret: setup.secret }, TOTP_SETUP_S, kit.sealedOpts(device))
      return {}
    }),
    action('factors/totp/confirm', 'fresh-password', 'security', async (c) => {
      const result = await confirmTotp(deps, c.account.did, c.fields.code ?? '')
      if (!result.ok) return { error: 'That code did not match. Check the time on your device and try the current code.' }
      await addedHere(c)
      clearSealed(c.res, TOTP, { config, path: PATH })
      return { notice: 'Your authenticator app is on.', recoveryCodes: result.recoveryCodes }
    }),
    action('factors/totp/disable', 'fresh-password', 'security', async ({ res, account }) => {
      await disableTotp(deps, account.did)
      clearSealed(res, TOTP, { config, path: PATH })
      return { notice: 'The authenticator app was removed.' }
    }),
    action('factors/recovery', 'fresh-password', 'security', async ({ account }) => {
      const f = await factorsOf(db, account.did)
      if (!f.totp && !f.passkeys) return { error: 'Recovery codes come with an authenticator app or a passkey.' }
      return {
        notice: 'New recovery codes; the old ones no longer work.',
        recoveryCodes: await issueRecoveryCodes(db, config, account.did),
      }
    }),

    // the page's script asks for the options, then posts the browser's answer as a form
    action('passkeys/options', 'fresh-password', 'security', async ({ account }) =>
      json(await passkeyRegistrationOptions(deps, { did: account.did, handle: account.handle })),
    ),
    action('passkeys/add', 'fresh-password', 'security', async (c) => {
      const response = parseJson(c.fields.response)
      if (!response) return { error: 'Adding a passkey needs JavaScript and a browser that supports passkeys.' }
      const result = await verifyPasskeyRegistration(deps, c.account.did, response as never, c.fields.name)
      if (!result.ok) return { error: result.message }
      await addedHere(c)
      return { notice: `Passkey “${result.passkey.name}” added.`, recoveryCodes: result.recoveryCodes }
    }),
    action('passkeys/rename', 'signed-in', 'security', async ({ account, fields: f }) => {
      const ok = await renamePasskey(db, account.did, f.id ?? '', f.name ?? '')
      return ok ? { notice: 'Passkey renamed.' } : { error: 'That passkey is gone.' }
    }),
    action('passkeys/remove', 'fresh-password', 'security', async ({ account, fields: f }) => {
      const ok = await removePasskey(deps, account.did, f.id ?? '')
      return ok ? { notice: 'Passkey removed.' } : { error: 'That passkey is gone.' }
    }),

    action('deactivate', 'fresh-password', 'status', async ({ account }) => {
      await deactivate(db, account.did)
      return { notice: 'Your account is deactivated. Reactivate it here whenever you like.' }
    }),
    action(
      'activate',
      'signed-in',
      'status',
      async ({ account }) => {
        if (account.status === 'deactivated' && account.migration_state === 'migrating-in')
          await checkDocNamesUs({ db, config }, account.did)
        await activate(db, account.did)
        return { notice: 'Your account is active again.' }
      },
      { statuses: ['active', 'deactivated'] },
    ),
    action(
      'delete/request',
      'fresh-password',
      'status',
      async ({ account }) => {
        await sendDeleteToken(deps, account)
        return { notice: `We sent a deletion code to ${account.email}. It is valid for one hour.` }
      },
      { rate: 'email' },
    ),
    action(
      'delete',
      'fresh-password',
      'status',
      async ({ res, device, account, fields: f, budget }) => {
        const wrong = wrongPassword(await flow.checkPassword(deps, account, f.password ?? '', budget))
        if (wrong) return wrong
        await deleteWithToken(deps, account.did, (f.token ?? '').trim())
        await forgetAccount(db, device.id, account.did)
        clearCookie(res, CURRENT, { publicUrl: config.publicUrl, path: PATH })
        return page(deletedPage(kit.server))
      },
      { rate: 'login' },
    ),
  ]
}
