// GET /account: the sign-in views (a remembered account to pick, handle and password, the second
// step, the password again before a sensitive change) or the account page itself.
import { factorsOf, listPasskeys, qrSvg } from '../../account/factors/index.js'
import { listAppPasswords } from '../../account/app-passwords.js'
import { connectedApps } from '../../oauth/store.js'
import { serverSignsFor } from '../../identity/control.js'
import { consentWords } from '../../oauth/consent-words.js'
import { deviceAccounts } from '../devices.js'
import { spacesOf } from './spaces.js'
import { readSealed } from '../sealed.js'
import * as flow from '../sign-in/flow.js'
import type { RowContext, Signed } from '../rows.js'
import { accountPage, confirmPage, loginPage, pickerPage, secondFactorPage, type AccountView, type ConnectedAppView } from './views.js'
import { done, page, PATH, REAUTH_S, sectionOf, TOTP, type AccountKit, type AccountRowDef, type Answer } from './kit.js'

export function homeRows(kit: AccountKit): AccountRowDef[] {
  const { db, config, oauth } = kit.deps

  async function home({ req, res, device, signed }: RowContext): Promise<Answer> {
    const c = kit.common(device, kit.takeFlash(req, res, device))
    const view = typeof req.query.view === 'string' ? req.query.view : undefined
    const accounts = await deviceAccounts(db, device.id)
    if (view === 'login') {
      const handle = typeof req.query.handle === 'string' ? req.query.handle : undefined
      return page(loginPage(c, { handle, hasAccounts: accounts.length > 0 }))
    }
    if (view === 'second-factor') {
      const held = await flow.held(db, kit.place(device))
      if (!held) return done({ error: 'That sign-in expired. Sign in again.' })
      const factors = await factorsOf(db, held.account.did)
      return page(secondFactorPage(c, { handle: held.account.handle, factors }), { scripts: true })
    }
    if (!signed) return page(accounts.length ? pickerPage(c, accounts) : loginPage(c, { hasAccounts: false }))
    if (view === 'confirm') return page(confirmPage(c, { handle: signed.account.handle, then: sectionOf(req.query.then) ?? '' }))
    const totp = readSealed<{ uri: string; secret: string }>(req, TOTP, kit.sealedOpts(device))
    const v = await accountView(signed)
    if (totp && !v.factors.totp) c.flash.totp = totp
    const qr = c.flash.totp ? await qrSvg(c.flash.totp.uri) : undefined
    return page(accountPage(c, v, qr), { scripts: true })
  }

  async function accountView({ account, session }: Signed): Promise<AccountView> {
    const did = account.did
    const tokens = await db
      .selectFrom('email_token')
      .select(['purpose', 'new_email'])
      .where('did', '=', did)
      .where('expires_at', '>', new Date().toISOString())
      .execute()
    const apps = await Promise.all((await connectedApps(db, did)).map(appView))
    // only a password given here unlocks: a passkey alone signs in but confirms no password
    const unlockedUntil = session.passwordAt ? new Date(Date.parse(session.passwordAt) + REAUTH_S * 1000) : undefined
    return {
      did,
      handle: account.handle,
      email: account.email,
      emailConfirmed: !!account.email_confirmed_at,
      status: account.status,
      unlockedUntil: unlockedUntil && unlockedUntil.getTime() > Date.now() ? unlockedUntil : undefined,
      apps,
      appPasswords: await listAppPasswords(db, did),
      factors: await factorsOf(db, did),
      passkeys: await listPasskeys(db, did),
      handleDomains: config.handleDomains,
      spaces: await spacesOf(db, did),
      didOutOfControl: (await serverSignsFor(db, config.plcUrl, kit.deps.rotationKey.did(), did)) === false,
      pending: {
        emailChange: tokens.find((t) => t.purpose === 'update-email')?.new_email ?? undefined,
        confirm: tokens.some((t) => t.purpose === 'confirm-email'),
        deletion: tokens.some((t) => t.purpose === 'delete-account'),
      },
    }
  }

  async function appView(app: { clientId: string; scope: string; lastActiveAt: string }): Promise<ConnectedAppView> {
    let name: string | undefined
    let loopback = false
    try {
      const m = await oauth.clients.resolve(app.clientId)
      loopback = !!m.loopback
      name = m.client_name
    } catch {
      name = undefined
    }
    let host = app.clientId
    try {
      host = new URL(app.clientId).host
    } catch {
      // shown as stored
    }
    return {
      clientId: app.clientId,
      name: loopback ? 'An app on this computer' : (name ?? host),
      host: loopback ? 'loopback' : host,
      scope: app.scope,
      words: consentWords(app.scope),
      lastActiveAt: app.lastActiveAt,
    }
  }

  // the page itself decides what a visitor without a sign-in sees, so its gate is none
  return [{ method: 'get', path: PATH, gate: 'none', csrf: false, run: home }]
}
