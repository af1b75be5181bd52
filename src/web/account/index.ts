// /account: what a person manages without an app. The same device session as the OAuth sign-in
// (signing in on either counts for both), the same CSRF tokens, headers and layout. Every action
// is a form post answered by a redirect (post, redirect, get); what the next page shows once
// travels in a sealed cookie. Sensitive changes need the password confirmed on this device within
// the last few minutes; ending access (an app, an app password) and undoing a deactivation do not.
// Every rule lives in the domain modules the XRPC methods use; this file only calls them.
import { formFields, wrap } from '../forms.js'
import express, { Router, type Request, type Response } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import type { Services } from '../../context.js'
import type { AccountRow } from '../../account/store.js'
import { createAppPassword, listAppPasswords, revokeAppPassword } from '../../account/app-passwords.js'
import { changeEmail, confirmEmail } from '../../account/email.js'
import { requestEmailChange, sendDeleteToken, sendEmailConfirmation } from '../../account/email-requests.js'
import { checkHandleFree, validateHandle } from '../../account/handles.js'
import { MAX_PASSWORD_LENGTH } from '../../account/password.js'
import { changePassword } from '../../account/passwords.js'
import { MIN_PASSWORD_LENGTH, requestPasswordReset, resetPassword } from '../../account/password-reset.js'
import { activate, deactivate, deleteWithToken } from '../../account/lifecycle.js'
import {
  beginTotp,
  confirmTotp,
  disableTotp,
  factorsOf,
  issueRecoveryCodes,
  listPasskeys,
  passkeyAuthenticationOptions,
  passkeyRegistrationOptions,
  qrSvg,
  removePasskey,
  renamePasskey,
  setEmailAuthFactor,
  verifyPasskeyRegistration,
} from '../../account/factors/index.js'
import { setHandle } from '../../identity/amend.js'
import { checkDocNamesUs } from '../../migration/did-control.js'
import { endClientGrants } from '../../auth/revocation.js'
import { connectedApps } from '../../oauth/store.js'
import { consentWords } from '../../oauth/consent-words.js'
import { OAUTH_ACCESS_TTL_S } from '../../oauth/tokens.js'
import { REMEMBERED_MAX_S } from '../../oauth/authorize.js'
import { resetPage, resetRequestPage, type Flow } from '../../oauth/page.js'
import { sendPage } from '../headers.js'
import { messagePage, serverInfo } from '../layout.js'
import { csrfToken } from '../csrf.js'
import { clearCookie, readCookie, setCookie } from '../cookies.js'
import { deviceAccounts, formDevice, forgetAccount, pageDevice, rememberAccount, type Device, type DeviceAccount } from '../devices.js'
import * as flow from '../sign-in/flow.js'
import { clearSealed, readSealed, setSealed } from '../sealed.js'
import { PASSKEY_SCRIPT } from './script.js'
import {
  accountPage,
  confirmPage,
  deletedPage,
  loginPage,
  pickerPage,
  secondFactorPage,
  SCRIPT_PATH,
  type AccountView,
  type Common,
  type ConnectedAppView,
  type Flash,
} from './views.js'

/** how long a confirmed password unlocks sensitive changes on this device */
export const REAUTH_S = 5 * 60
const PATH = '/account'
/** which of the device's signed-in accounts the page shows (the device session is the authority) */
const CURRENT = 'pds_account'
/** the account page's place for a held sign-in step on a device (an OAuth sign-in's is its request) */
const PLACE = 'account'
/** how long an authenticator app being set up waits for its first code */
const TOTP_SETUP_S = 10 * 60
const FLASH = 'pds_account_flash'
const FLASH_S = 5 * 60
/** an authenticator app being set up: its key and QR code stay on the page until confirmed */
const TOTP = 'pds_account_totp'

type Deps = Pick<Services, 'config' | 'db' | 'oauth' | 'passwords' | 'mailer' | 'logger' | 'rotationKey' | 'outbound'>
type Fields = Record<string, string | undefined>
/** the account the page acts for, signed in on this device */
type Current = { device: Device; account: AccountRow; session: DeviceAccount }
type Ctx = Current & { req: Request; res: Response; body: Fields }
type Gate = 'signed-in' | 'sensitive'

// what a deactivated account may still do here: come back, and take access away
const WHILE_DEACTIVATED = new Set(['activate', 'apps/revoke', 'app-passwords/revoke'])
// which section of the page each action answers in
const SECTIONS = ['apps', 'app-passwords', 'email', 'handle', 'password', 'security', 'status'] as const

export function accountPages(deps: Deps): Router {
  const { config, db } = deps
  const server = serverInfo(config)
  const factorDeps = { db, config, mailer: deps.mailer }
  const r = Router()
  const body = express.urlencoded({ extended: false, limit: '64kb' })
  const sealedOpts = (device: Device) => ({ config, device, path: PATH })

  const flashTo = (res: Response, device: Device, flash: Flash) => setSealed(res, FLASH, flash, FLASH_S, sealedOpts(device))
  const takeFlash = (req: Request, res: Response, device: Device): Flash => {
    const flash = readSealed<Flash>(req, FLASH, sealedOpts(device)) ?? {}
    if (readCookie(req, FLASH) !== undefined) clearSealed(res, FLASH, { config, path: PATH })
    return flash
  }
  /** the redirect after a form: to the section it belongs to, with what to show once */
  const done = (res: Response, device: Device, flash: Flash, at?: string) => {
    flashTo(res, device, { ...flash, at })
    res.redirect(303, at ? `${PATH}#${at}` : PATH)
  }

  /** the account this device is signed in to on the page, when it still may use it */
  const current = async (req: Request, device: Device): Promise<Current | undefined> => {
    const did = readCookie(req, CURRENT)
    const signedIn = did ? await flow.signedIn(db, device.id, safeDecode(did), REMEMBERED_MAX_S) : undefined
    return signedIn && { device, ...signedIn }
  }
  const place = (device: Device): flow.Place => ({ deviceId: device.id, place: PLACE })

  /** the flow signed `did` in on the device (recorded there): the page shows that account */
  const signIn = (res: Response, did: string) =>
    setCookie(res, CURRENT, encodeURIComponent(did), { publicUrl: config.publicUrl, maxAgeS: REMEMBERED_MAX_S, path: PATH })

  const common = (device: Device, flash: Flash): Common => ({ server, csrf: csrfToken(device), flash })

  r.get(SCRIPT_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/javascript').send(PASSKEY_SCRIPT)
  })

  r.get(
    PATH,
    wrap(async (req, res) => {
      const device = await pageDevice(db, req, res, config.publicUrl)
      const flash = takeFlash(req, res, device)
      const c = common(device, flash)
      const view = typeof req.query.view === 'string' ? req.query.view : undefined
      const accounts = await deviceAccounts(db, device.id)
      if (view === 'login') {
        const handle = typeof req.query.handle === 'string' ? req.query.handle : undefined
        return sendPage(res, loginPage(c, { handle, hasAccounts: accounts.length > 0 }))
      }
      if (view === 'second-factor') {
        const held = await flow.held(db, place(device))
        if (!held) return done(res, device, { error: 'That sign-in expired. Sign in again.' })
        const { account } = held
        return sendPage(res, secondFactorPage(c, { handle: account.handle, factors: await factorsOf(db, account.did) }), { scripts: true })
      }
      const cur = await current(req, device)
      if (!cur) {
        if (!accounts.length) return sendPage(res, loginPage(c, { hasAccounts: false }))
        return sendPage(res, pickerPage(c, accounts))
      }
      if (view === 'confirm') {
        const then = typeof req.query.then === 'string' && (SECTIONS as readonly string[]).includes(req.query.then) ? req.query.then : ''
        return sendPage(res, confirmPage(c, { handle: cur.account.handle, then }))
      }
      const totp = readSealed<{ uri: string; secret: string }>(req, TOTP, sealedOpts(device))
      const view_ = await accountView(cur)
      if (totp && !view_.factors.totp) c.flash.totp = totp
      const qr = c.flash.totp ? await qrSvg(c.flash.totp.uri) : undefined
      sendPage(res, accountPage(c, view_, qr), { scripts: true })
    }),
  )

  async function accountView(cur: Current): Promise<AccountView> {
    const { account, session } = cur
    const did = account.did
    const tokens = await db
      .selectFrom('email_token')
      .select(['purpose', 'new_email'])
      .where('did', '=', did)
      .where('expires_at', '>', new Date().toISOString())
      .execute()
    const apps = await Promise.all((await connectedApps(db, did)).map(appView))
    // only a password given here unlocks: a passkey alone signs in but confirms no password
    const unlockedUntil = new Date(Date.parse(session.passwordAt ?? '1970-01-01T00:00:00Z') + REAUTH_S * 1000)
    return {
      did,
      handle: account.handle,
      email: account.email,
      emailConfirmed: !!account.email_confirmed_at,
      status: account.status,
      unlockedUntil: unlockedUntil.getTime() > Date.now() ? unlockedUntil : undefined,
      apps,
      appPasswords: await listAppPasswords(db, did),
      factors: await factorsOf(db, did),
      passkeys: await listPasskeys(db, did),
      handleDomains: config.handleDomains,
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
      const m = await deps.oauth.clients.resolve(app.clientId)
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

  /** a form post: the device's CSRF token first, always */
  const post = (path: string, fn: (req: Request, res: Response, device: Device, body: Fields) => Promise<unknown>) =>
    r.post(
      `${PATH}/${path}`,
      body,
      wrap(async (req, res) => {
        const fields = formFields(req.body)
        if (!fields) return sendPage(res, messagePage(server, 'Bad request', 'Each form field may be given once.'), { status: 400 })
        const device = await formDevice(db, req, fields.csrf_token)
        if (!device) {
          return sendPage(res, messagePage(server, 'Form expired', 'This form is no longer valid. Reload the page and try again.'), {
            status: 403,
          })
        }
        await fn(req, res, device, fields)
      }),
    )

  /** an action of a signed-in account; `sensitive` ones also need a recent password */
  const action = (path: string, gate: Gate, at: (typeof SECTIONS)[number], fn: (c: Ctx) => Promise<Flash | void>) =>
    post(path, async (req, res, device, fields) => {
      const cur = await current(req, device)
      if (!cur) return done(res, device, { error: 'Sign in to continue.' })
      // as with the XRPC methods: a deactivated account changes nothing until reactivated
      if (cur.account.status !== 'active' && !WHILE_DEACTIVATED.has(path)) {
        return done(res, device, { error: 'Your account is deactivated. Reactivate it to change this.' }, 'status')
      }
      if (gate === 'sensitive' && !flow.passwordFresh(cur.session, REAUTH_S)) {
        flashTo(res, device, { notice: 'Confirm your password to make this change.' })
        return res.redirect(303, `${PATH}?view=confirm&then=${at}`)
      }
      let flash: Flash | void
      try {
        flash = await fn({ ...cur, req, res, body: fields })
      } catch (err) {
        if (err instanceof XRPCError) return done(res, device, { error: err.message, ...(err as { flash?: Flash }).flash }, at)
        throw err
      }
      if (!res.headersSent) done(res, device, flash ?? {}, at)
    })

  const budget = (req: Request) => ({ attempt: (id: string) => deps.passwords.attempt(req, id) })
  /** the main password of the account, on the login budget */
  const passwordMatches = async (req: Request, account: AccountRow, password: string | undefined): Promise<Flash | undefined> =>
    wrongPassword(await flow.checkPassword(deps, account, password ?? '', budget(req)))

  // ---- signing in

  post('sign-in', async (req, res, device, f) => {
    const handle = (f.handle ?? '').trim()
    const out = await flow.passwordStep(
      deps,
      place(device),
      { identifier: handle, password: f.password ?? '', remember: f.remember === 'on' },
      budget(req),
    )
    const again = (error: string, status: number, retryAfterS?: number) =>
      sendPage(res, loginPage(common(device, { error }), { handle, hasAccounts: false }), { status, retryAfterS })
    if (out.kind === 'rateLimited') return again(tooMany(out.retryAfterS), 429, out.retryAfterS)
    if (out.kind === 'refused')
      return again(out.why === 'takendown' ? 'This account has been taken down.' : 'Wrong handle or password.', 401)
    if (out.kind === 'factor') {
      flashTo(res, device, mailedFlash(out.mailed))
      return res.redirect(303, `${PATH}?view=second-factor`)
    }
    if (out.kind !== 'signedIn') return done(res, device, { error: 'That sign-in expired. Sign in again.' })
    signIn(res, out.account.did)
    done(res, device, {})
  })

  /** the second step's outcome: signed in, or the step again with what went wrong */
  const secondStep = (res: Response, device: Device, out: flow.Outcome) => {
    if (out.kind === 'signedIn') {
      signIn(res, out.account.did)
      return done(res, device, {})
    }
    if (out.kind === 'restart' || !out.account) {
      const error =
        out.kind === 'restart' && out.why === 'tooManyWrong'
          ? 'Too many wrong codes. Sign in again.'
          : 'That sign-in expired. Sign in again.'
      return done(res, device, { error })
    }
    const error =
      out.kind === 'rateLimited'
        ? tooMany(out.retryAfterS)
        : out.kind === 'refused' && out.why === 'codeExpired'
          ? 'That code has expired. Ask for a new one.'
          : 'That did not work. Check the code and try again.'
    flashTo(res, device, { error })
    res.redirect(303, `${PATH}?view=second-factor`)
  }

  post('sign-in/code', async (req, res, device, f) =>
    secondStep(res, device, await flow.factorStep(deps, place(device), { code: f.code ?? '' }, budget(req))),
  )
  post('sign-in/passkey', async (req, res, device, f) => {
    const response = parseJson(f.response)
    if (!response) {
      flashTo(res, device, { error: 'The passkey did not answer. Try again.' })
      return res.redirect(303, `${PATH}?view=second-factor`)
    }
    return secondStep(res, device, await flow.factorStep(deps, place(device), { passkeyResponse: response as never }, budget(req)))
  })
  post('sign-in/passkey-options', async (_req, res, device) => {
    const held = await flow.held(db, place(device))
    if (!held || held.step.awaits !== 'factor') return res.status(401).json({ error: 'That sign-in expired. Sign in again.' })
    res.setHeader('Cache-Control', 'no-store')
    res.json(await passkeyAuthenticationOptions(factorDeps, held.step.did))
  })
  post('sign-in/email-code', async (_req, res, device) => {
    const held = await flow.held(db, place(device))
    if (!held) return done(res, device, { error: 'That sign-in expired. Sign in again.' })
    const mailed = await flow.resendCode(deps, place(device))
    flashTo(
      res,
      device,
      mailed === undefined || mailed === 'none'
        ? { error: 'Email codes are not on for this account.' }
        : mailedFlash(mailed, 'We emailed you a new code.'),
    )
    res.redirect(303, `${PATH}?view=second-factor`)
  })

  post('select', async (req, res, device, f) => {
    const remembered = (await deviceAccounts(db, device.id)).find((a) => a.did === f.did)
    if (!remembered) return done(res, device, { error: 'That account is no longer remembered on this device.' })
    const account = (await flow.signedIn(db, device.id, remembered.did, REMEMBERED_MAX_S))?.account
    if (!account) {
      flashTo(res, device, { notice: 'Enter your password to continue.' })
      return res.redirect(303, `${PATH}?view=login&handle=${encodeURIComponent(remembered.handle)}`)
    }
    setCookie(res, CURRENT, encodeURIComponent(account.did), { publicUrl: config.publicUrl, maxAgeS: REMEMBERED_MAX_S, path: PATH })
    done(res, device, {})
  })

  post('forget', async (_req, res, device, f) => {
    if (f.did) await forgetAccount(db, device.id, f.did)
    done(res, device, { notice: 'The account was forgotten on this device.' })
  })

  post('sign-out', async (req, res, device) => {
    const did = readCookie(req, CURRENT)
    if (did) await forgetAccount(db, device.id, safeDecode(did))
    clearCookie(res, CURRENT, { publicUrl: config.publicUrl, path: PATH })
    done(res, device, { notice: 'You are signed out on this device.' })
  })

  post('confirm', async (req, res, device, f) => {
    const cur = await current(req, device)
    if (!cur) return done(res, device, { error: 'Sign in to continue.' })
    const then = (SECTIONS as readonly string[]).includes(f.then ?? '') ? f.then : undefined
    const wrong = wrongPassword(
      await flow.confirmPassword(
        deps,
        place(device),
        cur.account,
        { password: f.password ?? '', remember: cur.session.remember },
        budget(req),
      ),
    )
    if (wrong) {
      flashTo(res, device, wrong)
      return res.redirect(303, `${PATH}?view=confirm${then ? `&then=${then}` : ''}`)
    }
    done(res, device, { notice: 'Password confirmed. You can make the change now.' }, then)
  })

  // ---- connected apps and app passwords

  action('apps/revoke', 'signed-in', 'apps', async ({ account, body: f }) => {
    const ended = f.client_id ? await endClientGrants(db, account.did, f.client_id, OAUTH_ACCESS_TTL_S) : 0
    return ended ? { notice: 'The app was signed out and can no longer use your account.' } : { error: 'That app was not connected.' }
  })

  action('app-passwords/create', 'sensitive', 'app-passwords', async ({ account, body: f }) => {
    const made = await createAppPassword(db, account.did, (f.name ?? '').trim(), f.privileged === 'on')
    return { appPassword: { name: made.name, password: made.password, privileged: made.privileged } }
  })

  action('app-passwords/revoke', 'signed-in', 'app-passwords', async ({ account, body: f }) => {
    await revokeAppPassword(db, account.did, f.name ?? '')
    return { notice: `The app password ${f.name ?? ''} was revoked; apps using it are signed out.` }
  })

  // ---- email

  /** an email the account asks for spends the budget the XRPC methods that send one share */
  const emailBudget = async (req: Request, did: string): Promise<Flash | undefined> => {
    const wait = await deps.passwords.spend(req, 'email', did)
    return wait === undefined ? undefined : { error: tooMany(wait, 'emails') }
  }

  action('email/send-confirmation', 'signed-in', 'email', async ({ req, account }) => {
    const spent = await emailBudget(req, account.did)
    if (spent) return spent
    const sent = await sendEmailConfirmation(deps, account)
    return { notice: sent ? `We sent a confirmation code to ${account.email}.` : 'The address is already confirmed.' }
  })

  action('email/confirm', 'signed-in', 'email', async ({ account, body: f }) => {
    await confirmEmail(db, account.did, (f.token ?? '').trim())
    return { notice: 'Your email address is confirmed.' }
  })

  action('email/change-request', 'sensitive', 'email', async ({ req, account, body: f }) => {
    const spent = await emailBudget(req, account.did)
    if (spent) return spent
    const to = await requestEmailChange(deps, account, f.email ?? '')
    return { notice: `We sent a code to ${to}. Enter it below to change the address.` }
  })

  action('email/change', 'sensitive', 'email', async ({ account, body: f }) => {
    if (!f.token?.trim()) return { error: 'Enter the code from the email.' }
    await changeEmail(db, account.did, { token: f.token.trim(), email: '' })
    return { notice: 'Your email address was changed. Confirm the new address to use it for sign-in codes.' }
  })

  // ---- handle

  action('handle', 'sensitive', 'handle', async ({ account, body: f }) => {
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
      // the records to publish stay on the page, naming the domain that was tried
      if (err instanceof XRPCError && own) Object.assign(err, { flash: { ownDomain: handle } })
      throw err
    }
  })

  // ---- password: the current one is itself the confirmation

  action('password', 'signed-in', 'password', async ({ req, device, account, session, body: f }) => {
    const wrong = await passwordMatches(req, account, f.current)
    if (wrong) return wrong
    const next = f.password ?? ''
    if (next.length < MIN_PASSWORD_LENGTH) return { error: `Passwords are at least ${MIN_PASSWORD_LENGTH} characters.` }
    if (next.length > MAX_PASSWORD_LENGTH) return { error: `Passwords are at most ${MAX_PASSWORD_LENGTH} characters.` }
    await changePassword(deps, account.did, next, 'owner')
    // every session ended, this device's too: it stays signed in, having just shown the password,
    // with the second factor its sign-in had
    await rememberAccount(db, device.id, account.did, { remember: session.remember, password: true, factor: session.factorGiven })
    return { notice: 'Your password was changed. Every other session was signed out.' }
  })

  // ---- second factors

  action('factors/email', 'sensitive', 'security', async ({ device, account, session, body: f }) => {
    const on = f.on === '1'
    if (!(await setEmailAuthFactor(db, account.did, on))) return { error: 'Confirm your email address first.' }
    // the owner turning a factor on here keeps this sign-in; other devices' sign-ins without it end
    if (on) await flow.factorAddedHere(db, place(device), account, session.remember)
    return { notice: on ? 'Email sign-in codes are on.' : 'Email sign-in codes are off.' }
  })

  action('factors/totp/begin', 'sensitive', 'security', async ({ res, device, account }) => {
    const setup = await beginTotp(factorDeps, account.did, account.handle)
    if ('alreadyOn' in setup) return { error: 'An authenticator app is already on.' }
    setSealed(res, TOTP, { uri: setup.uri, secret: setup.secret }, TOTP_SETUP_S, sealedOpts(device))
  })

  action('factors/totp/confirm', 'sensitive', 'security', async ({ res, device, account, session, body: f }) => {
    const result = await confirmTotp(factorDeps, account.did, f.code ?? '')
    if (!result.ok) return { error: 'That code did not match. Check the time on your device and try the current code.' }
    await flow.factorAddedHere(db, place(device), account, session.remember)
    clearSealed(res, TOTP, { config, path: PATH })
    return { notice: 'Your authenticator app is on.', recoveryCodes: result.recoveryCodes }
  })

  action('factors/totp/disable', 'sensitive', 'security', async ({ res, account }) => {
    await disableTotp(factorDeps, account.did)
    clearSealed(res, TOTP, { config, path: PATH })
    return { notice: 'The authenticator app was removed.' }
  })

  action('factors/recovery', 'sensitive', 'security', async ({ account }) => {
    const f = await factorsOf(db, account.did)
    if (!f.totp && !f.passkeys) return { error: 'Recovery codes come with an authenticator app or a passkey.' }
    return { notice: 'New recovery codes; the old ones no longer work.', recoveryCodes: await issueRecoveryCodes(db, config, account.did) }
  })

  // the page's script asks for the options, then posts the browser's answer as a form
  post('passkeys/options', async (req, res, device) => {
    const cur = await current(req, device)
    if (!cur || !flow.passwordFresh(cur.session, REAUTH_S)) {
      flashTo(res, device, { notice: 'Confirm your password to add a passkey.' })
      return res.status(403).json({ error: 'reauth', location: `${PATH}?view=confirm&then=security` })
    }
    res.setHeader('Cache-Control', 'no-store')
    res.json(await passkeyRegistrationOptions(factorDeps, { did: cur.account.did, handle: cur.account.handle }))
  })

  action('passkeys/add', 'sensitive', 'security', async ({ device, account, session, body: f }) => {
    const response = parseJson(f.response)
    if (!response) return { error: 'Adding a passkey needs JavaScript and a browser that supports passkeys.' }
    const result = await verifyPasskeyRegistration(factorDeps, account.did, response as never, f.name)
    if (!result.ok) return { error: result.message }
    await flow.factorAddedHere(db, place(device), account, session.remember)
    return { notice: `Passkey “${result.passkey.name}” added.`, recoveryCodes: result.recoveryCodes }
  })

  action('passkeys/rename', 'signed-in', 'security', async ({ account, body: f }) => {
    const ok = await renamePasskey(db, account.did, f.id ?? '', f.name ?? '')
    return ok ? { notice: 'Passkey renamed.' } : { error: 'That passkey is gone.' }
  })

  action('passkeys/remove', 'sensitive', 'security', async ({ account, body: f }) => {
    const ok = await removePasskey(db, account.did, f.id ?? '')
    return ok ? { notice: 'Passkey removed.' } : { error: 'That passkey is gone.' }
  })

  // ---- deactivate, reactivate, delete

  action('deactivate', 'sensitive', 'status', async ({ account }) => {
    await deactivate(db, account.did)
    return { notice: 'Your account is deactivated. Reactivate it here whenever you like.' }
  })

  action('activate', 'signed-in', 'status', async ({ account }) => {
    if (account.status === 'deactivated' && account.migration_state === 'migrating-in') await checkDocNamesUs({ db, config }, account.did)
    await activate(db, account.did)
    return { notice: 'Your account is active again.' }
  })

  action('delete/request', 'sensitive', 'status', async ({ req, account }) => {
    const spent = await emailBudget(req, account.did)
    if (spent) return spent
    await sendDeleteToken(deps, account)
    return { notice: `We sent a deletion code to ${account.email}. It is valid for one hour.` }
  })

  action('delete', 'sensitive', 'status', async ({ req, res, device, account, body: f }) => {
    const wrong = await passwordMatches(req, account, f.password)
    if (wrong) return wrong
    await deleteWithToken(db, account.did, (f.token ?? '').trim())
    await forgetAccount(db, device.id, account.did)
    clearCookie(res, CURRENT, { publicUrl: config.publicUrl, path: PATH })
    sendPage(res, deletedPage(server))
  })

  // ---- a forgotten password, outside any app's sign-in

  const forgotFlow = (device: Device, extra: { error?: string; notice?: string } = {}): Flow => ({
    server,
    client: { id: config.publicUrl, name: server.name, loopback: false },
    action: `${PATH}/forgot`,
    link: (view) => (view === 'login' ? `${PATH}?view=login` : `${PATH}/forgot${view === 'reset-token' ? '?view=reset-token' : ''}`),
    csrf: csrfToken(device),
    ...extra,
  })
  r.get(
    `${PATH}/forgot`,
    wrap(async (req, res) => {
      const device = await pageDevice(db, req, res, config.publicUrl)
      const f = forgotFlow(device)
      sendPage(res, req.query.view === 'reset-token' ? resetPage(f) : resetRequestPage(f, {}))
    }),
  )
  post('forgot', async (req, res, device, f) => {
    const wait = await deps.passwords.spend(req, 'resetPassword')
    const page = f.step === 'reset' ? (x: Flow) => resetPage(x) : (x: Flow) => resetRequestPage(x, f)
    if (wait !== undefined) return sendPage(res, page(forgotFlow(device, { error: tooMany(wait) })), { status: 429, retryAfterS: wait })
    if (f.step !== 'reset') {
      if (!f.email?.trim()) return sendPage(res, page(forgotFlow(device, { error: 'Enter your email address.' })), { status: 400 })
      await requestPasswordReset(deps, f.email)
      return sendPage(res, resetPage(forgotFlow(device, { notice: 'If an account uses that address, we sent it a code.' })))
    }
    try {
      await resetPassword(deps, (f.token ?? '').trim().toUpperCase(), f.password ?? '')
    } catch (err) {
      if (!(err instanceof XRPCError)) throw err
      const error = err.customErrorName === 'InvalidToken' ? 'That code is wrong or has expired.' : err.message
      return sendPage(res, resetPage(forgotFlow(device, { error })), { status: 400 })
    }
    flashTo(res, device, { notice: 'Your password was changed. Sign in with the new one.' })
    res.redirect(303, `${PATH}?view=login`)
  })

  return r
}

/** what a failed password check says, or undefined when the password was right */
function wrongPassword(out: flow.Outcome): Flash | undefined {
  if (out.kind === 'signedIn') return undefined
  if (out.kind === 'rateLimited') return { error: tooMany(out.retryAfterS) }
  return { error: 'That password is not right.' }
}

/** what the page says about a sign-in code it mailed (or could not) */
function mailedFlash(mailed: flow.Mailed, sent = 'We emailed you a sign-in code.'): Flash {
  if (mailed === 'sent') return { notice: sent }
  if (mailed === 'none') return {}
  if (mailed === 'tooSoon') return { error: 'A code was sent moments ago. Wait a little before asking for another.' }
  if (mailed === 'down') return { error: 'The email with your code could not be sent. Try "Email me a new code" in a little while.' }
  return { error: tooMany(mailed.retryAfterS, 'codes sent') }
}

function tooMany(waitS: number, what = 'attempts'): string {
  const minutes = Math.ceil(waitS / 60)
  const when = minutes <= 1 ? 'a minute' : minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
  return `Too many ${what} for this account or from this network. Try again in ${when}.`
}

/** a cookie's percent-encoded value; a mangled one is no value */
function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v)
  } catch {
    return ''
  }
}

function parseJson(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined
  try {
    const v: unknown = JSON.parse(text)
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}
