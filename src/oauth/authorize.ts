// The pages of /oauth/authorize: pick an account remembered on this device (or type one), prove
// it with the main password, then allow or deny what the app asks for. Sign-up and a forgotten
// password happen inside the same flow. The device session (web/devices.ts) remembers who signed
// in here; the pushed request stays single use: one code at most, whatever the path through.
import { formFields, wrap } from '../web/forms.js'
import express, { Router, type Request, type Response } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import { createFreshAccount } from '../account/create.js'
import { signUpUnavailable } from '../account/creation-policy.js'
import { requestPasswordReset, resetPassword } from '../account/password-reset.js'
import { sendPage } from '../web/headers.js'
import { messagePage, serverInfo } from '../web/layout.js'
import { csrfToken } from '../web/csrf.js'
import { deviceAccounts, formDevice, forgetAccount, pageDevice, rememberAccount, type Device, type DeviceAccount } from '../web/devices.js'
import { passwordStep as flowPassword, signedIn } from '../web/sign-in/flow.js'
import type { ClientMetadata } from './clients.js'
import { consentWords, type PermissionSetInfo } from './consent-words.js'
import { consentPage, loginPage, pickerPage, resetPage, resetRequestPage, signupPage, type ClientView, type Flow } from './page.js'
import { randomId } from './tokens.js'
import { FACTOR_STEPS, factorSteps } from './factor-steps.js'
import { passkeySignIn } from './factor-page.js'
import * as store from './store.js'

/** a remembered account's sign-in on this device counts this long before the password is asked again */
export const REMEMBERED_MAX_S = 7 * 24 * 3600
const CODE_TTL_S = 60
// a person working through the pages (a reset email, a sign-up) keeps the request alive this
// much longer after each page, up to a bound from when the app pushed it
const ACTIVITY_S = 10 * 60
const REQUEST_MAX_S = 60 * 60
export const PROMPTS = ['none', 'login', 'consent', 'select_account', 'create'] as const

type Deps = Pick<Services, 'config' | 'db' | 'oauth' | 'passwords' | 'mailer' | 'logger' | 'tokenKeys' | 'rotationKey' | 'outbound'>

/** the permission sets behind a request's include: scopes, for the consent page */
export type PermissionSetsFor = (scope: string) => Promise<PermissionSetInfo[]>
/** the scope a grant carries: include: scopes replaced by the permissions their sets grant */
export type ExpandScope = (scope: string) => Promise<string>

const later = (s: number) => new Date(Date.now() + s * 1000).toISOString()

export function authorizePages(
  deps: Deps,
  permissionSets: PermissionSetsFor = async () => [],
  expandScope: ExpandScope = async (scope) => scope,
): Router {
  const { config, db, oauth } = deps
  const server = serverInfo(config)
  const r = Router()
  const form = express.urlencoded({ extended: false, limit: '64kb' })

  type Req = store.OAuthRequest
  type Ctx = { req: Request; res: Response; row: Req; device: Device; client: ClientView }

  const pendingRequest = async (req: Request) => {
    const requestUri = typeof req.query.request_uri === 'string' ? req.query.request_uri : undefined
    const row = requestUri ? await store.pendingRequest(db, requestUri) : undefined
    if (!row) return undefined
    if (typeof req.query.client_id === 'string' && req.query.client_id !== row.client_id) return undefined
    const until = Math.min(Date.now() + ACTIVITY_S * 1000, Date.parse(row.created_at) + REQUEST_MAX_S * 1000)
    if (until > Date.parse(row.expires_at)) await store.extendRequest(db, row, new Date(until).toISOString())
    return row
  }
  const expired = (res: Response) =>
    sendPage(
      res,
      messagePage(server, 'Sign-in request expired', 'This sign-in request is unknown or has expired. Go back to the app and start again.'),
      { status: 400 },
    )

  const clientView = async (clientId: string): Promise<ClientView> => {
    let m: ClientMetadata | undefined
    try {
      m = await oauth.clients.resolve(clientId)
    } catch {
      m = undefined
    }
    if (m?.loopback) return { id: clientId, name: 'An app on this computer', loopback: true }
    return {
      id: clientId,
      name: m?.client_name ?? new URL(clientId).host,
      loopback: false,
      logoUri: m?.logo_uri,
      clientUri: m?.client_uri,
      tosUri: m?.tos_uri,
      policyUri: m?.policy_uri,
    }
  }

  const flow = (c: Ctx, extra: { error?: string; notice?: string } = {}): Flow => {
    const base = `/oauth/authorize?request_uri=${encodeURIComponent(c.row.request_uri)}`
    return {
      server,
      client: c.client,
      action: base,
      link: (view, more = {}) => `${base}&${new URLSearchParams({ view, ...more })}`,
      csrf: csrfToken(c.device),
      ...extra,
    }
  }

  type Shown = { status?: number; error?: string; notice?: string; retryAfterS?: number; scripts?: boolean }
  const show = (c: Ctx, page: (f: Flow) => ReturnType<typeof loginPage>, o: Shown = {}) =>
    sendPage(c.res, page(flow(c, o)), { status: o.status, retryAfterS: o.retryAfterS, httpsImages: !!c.client.logoUri, scripts: o.scripts })

  const showLogin = async (c: Ctx, handle: string | undefined, o: Shown = {}) => {
    const hasAccounts = (await deviceAccounts(db, c.device.id)).length > 0
    show(c, (f) => loginPage(f, { handle, remember: true, hasAccounts, passkey: passkeySignIn(f) }), { ...o, scripts: true })
  }
  const showPicker = async (c: Ctx, o: Shown = {}) => {
    const accounts = await deviceAccounts(db, c.device.id)
    if (!accounts.length) return showLogin(c, c.row.login_hint ?? undefined, o)
    show(c, (f) => pickerPage(f, accounts, passkeySignIn(f)), { ...o, scripts: true })
  }
  const showConsent = async (c: Ctx, account: { did: string; handle: string }, o: Shown = {}) => {
    // a set that stopped resolving since PAR is shown by its name alone; granting it then fails
    const sets = await permissionSets(c.row.scope).catch(() => [])
    const words = consentWords(c.row.scope, sets)
    show(c, (f) => consentPage(f, { did: account.did, handle: account.handle, words, scope: c.row.scope }), o)
  }
  // where no one may sign up (PDS_ACCOUNT_CREATION) the page says so before anyone fills it in
  const showSignup = (c: Ctx, fields: Record<string, string | undefined> = {}, o: Shown = signUpNotice()) =>
    show(
      c,
      (f) =>
        signupPage(f, {
          name: fields.name,
          domain: fields.domain,
          email: fields.email,
          inviteCode: fields.invite_code,
          domains: config.handleDomains,
          inviteRequired: config.inviteRequired,
          remember: fields.name === undefined || fields.remember === 'on',
        }),
      o,
    )

  const signUpNotice = (): Shown => {
    const why = signUpUnavailable(config.accountCreation)
    return why ? { status: 403, error: why } : {}
  }

  const redirectTo = (row: Req, params: Record<string, string>) => {
    const u = new URL(row.redirect_uri)
    u.searchParams.set('state', row.state)
    u.searchParams.set('iss', oauth.issuer)
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v)
    return u.href
  }

  /** the one way out with a code: the request is spent, whoever gets there first */
  const grant = async (c: Ctx, did: string) => {
    let scope: string
    try {
      scope = await expandScope(c.row.scope)
    } catch (err) {
      // a set that resolved at PAR no longer does: the app learns why, nothing is granted
      await store.dropRequest(db, c.row.request_uri)
      const description = err instanceof Error ? err.message : 'A permission set could not be resolved'
      return c.res.redirect(302, redirectTo(c.row, { error: 'invalid_scope', error_description: description }))
    }
    const code = randomId(32)
    if (!(await store.issueCode(db, { ...c.row, scope }, did, code, later(CODE_TTL_S)))) return expired(c.res)
    c.res.setHeader('Cache-Control', 'no-store')
    c.res.redirect(302, redirectTo(c.row, { code }))
  }

  /** an account signed in on this device whose sign-in still counts (the sign-in flow's one rule) */
  const usable = async (device: Device, did: string, maxAgeS: number): Promise<DeviceAccount | undefined> =>
    (await signedIn(db, device.id, did, maxAgeS))?.session

  const hintMatches = (row: Req, a: DeviceAccount) => {
    const hint = row.login_hint?.trim().toLowerCase().replace(/^@/, '')
    return !!hint && (a.handle === hint || a.did === hint)
  }

  // prompt=none: no page at all; a code only for an account signed in here that already granted
  // this app everything it asks for
  const silent = async (c: Ctx) => {
    const accounts = await deviceAccounts(db, c.device.id)
    const candidates = c.row.login_hint ? accounts.filter((a) => hintMatches(c.row, a)) : accounts
    const account = candidates.length === 1 ? await usable(c.device, candidates[0].did, REMEMBERED_MAX_S) : undefined
    if (!account) {
      await store.dropRequest(db, c.row.request_uri)
      return c.res.redirect(302, redirectTo(c.row, { error: 'login_required', error_description: 'No usable sign-in on this device' }))
    }
    const granted = await store.grantedScopes(db, account.did, c.row.client_id)
    // a grant holds what an include: expanded to, never the include: itself (one that no longer
    // resolves stays unexpanded, so it is never found granted)
    const asked = await expandScope(c.row.scope).catch(() => c.row.scope)
    if (
      !asked
        .split(' ')
        .filter(Boolean)
        .every((s) => granted.has(s))
    ) {
      await store.dropRequest(db, c.row.request_uri)
      return c.res.redirect(302, redirectTo(c.row, { error: 'consent_required', error_description: 'The app needs your consent' }))
    }
    return grant(c, account.did)
  }

  const factors = factorSteps<Ctx>(deps, {
    flow,
    httpsImages: (c) => !!c.client.logoUri,
    showLogin,
    showConsent,
    tooMany,
  })

  r.get(
    '/oauth/authorize',
    wrap(async (req, res) => {
      const row = await pendingRequest(req)
      if (!row) return expired(res)
      const device = await pageDevice(db, req, res, config.publicUrl)
      const c: Ctx = { req, res, row, device, client: await clientView(row.client_id) }
      const view = typeof req.query.view === 'string' ? req.query.view : undefined
      if (view === undefined && row.prompt === 'none') return silent(c)
      switch (view) {
        case 'login':
          return showLogin(c, (typeof req.query.handle === 'string' && req.query.handle) || (row.login_hint ?? undefined))
        case 'signup':
          return showSignup(c)
        case 'reset':
          return show(c, (f) => resetRequestPage(f, {}))
        case 'reset-token':
          return show(c, (f) => resetPage(f))
        case 'select':
          return showPicker(c)
        case 'factor':
          return factors.show(c)
      }
      if (row.prompt === 'create') return showSignup(c)
      if (row.prompt === 'login') return showLogin(c, row.login_hint ?? undefined)
      if (row.login_hint && row.prompt !== 'select_account') {
        // an app that names the account skips the list when that account is remembered here
        const remembered = (await deviceAccounts(db, device.id)).find((a) => hintMatches(row, a))
        if (!remembered) return showLogin(c, row.login_hint)
      }
      return showPicker(c)
    }),
  )

  r.post(
    '/oauth/authorize',
    form,
    wrap(async (req, res) => {
      const body = formFields(req.body)
      if (!body) return sendPage(res, messagePage(server, 'Bad request', 'Each form field may be given once.'), { status: 400 })
      const row = await pendingRequest(req)
      if (!row) return expired(res)
      const device = await formDevice(db, req, body.csrf_token)
      if (!device) {
        return sendPage(res, messagePage(server, 'Form expired', 'This sign-in form is no longer valid. Reload the page and try again.'), {
          status: 403,
        })
      }
      const c: Ctx = { req, res, row, device, client: await clientView(row.client_id) }

      if (body.action === 'deny' || body.step === 'deny') {
        await store.dropRequest(db, row.request_uri)
        return res.redirect(302, redirectTo(row, { error: 'access_denied', error_description: 'The user denied access' }))
      }
      // a form without a step but with a handle is the password form
      const step = body.step ?? (body.handle !== undefined ? 'login' : undefined)
      if (step && FACTOR_STEPS.has(step)) return factors.post(c, step, body)
      switch (step) {
        case 'select': {
          const remembered = (await deviceAccounts(db, device.id)).find((a) => a.did === body.did)
          if (!remembered) return showPicker(c, { status: 400, error: 'That account is no longer remembered on this device.' })
          const account = row.prompt === 'login' ? undefined : await usable(device, remembered.did, REMEMBERED_MAX_S)
          if (account) return showConsent(c, account)
          return showLogin(c, remembered.handle, { notice: 'Enter your password to continue.' })
        }
        case 'forget': {
          if (body.did) await forgetAccount(db, device.id, body.did)
          return showPicker(c, { notice: 'The account was forgotten on this device.' })
        }
        case 'login':
          return passwordStep(c, body)
        case 'consent':
          return consentStep(c, body)
        case 'signup':
          return signupStep(c, body)
        case 'reset-request': {
          const wait = await deps.passwords.spend(req, 'resetPassword')
          if (wait !== undefined) return show(c, (f) => resetRequestPage(f, body), tooMany(wait))
          if (!body.email?.trim()) return show(c, (f) => resetRequestPage(f, body), { status: 400, error: 'Enter your email address.' })
          await requestPasswordReset(deps, body.email)
          return show(c, (f) => resetPage(f), {
            notice: 'If an account uses that address, we sent it a code. It is valid for a limited time.',
          })
        }
        case 'reset': {
          const wait = await deps.passwords.spend(req, 'resetPassword')
          if (wait !== undefined) return show(c, (f) => resetPage(f), tooMany(wait))
          try {
            await resetPassword(deps, (body.token ?? '').trim().toUpperCase(), body.password ?? '')
          } catch (err) {
            if (err instanceof XRPCError) {
              const error = err.customErrorName === 'InvalidToken' ? 'That code is wrong or has expired.' : err.message
              return show(c, (f) => resetPage(f), { status: 400, error })
            }
            throw err
          }
          return showLogin(c, undefined, { notice: 'Your password was changed. Sign in with the new one.' })
        }
      }
      return showPicker(c, { status: 400, error: 'Choose an account, or Cancel.' })
    }),
  )

  async function passwordStep(c: Ctx, body: Record<string, string | undefined>) {
    const handleInput = (body.handle ?? '').trim()
    // the same budgets as createSession (per account and per address, before any hashing); the main
    // password only: an app password must not mint tokens with wider scopes than it has itself.
    // A form without the checkbox (an older page, a script) is not remembered.
    const out = await flowPassword(
      deps,
      { deviceId: c.device.id, place: c.row.request_uri },
      { identifier: handleInput, password: body.password ?? '', remember: body.remember === 'on' },
      { attempt: (id) => deps.passwords.attempt(c.req, id) },
    )
    if (out.kind === 'rateLimited') return showLogin(c, handleInput, tooMany(out.retryAfterS, 'sign-in attempts'))
    if (out.kind === 'refused') {
      const error = out.why === 'takendown' ? 'This account has been taken down.' : 'Wrong handle or password.'
      return showLogin(c, handleInput, { status: 401, error })
    }
    return factors.render(c, out)
  }

  async function consentStep(c: Ctx, body: Record<string, string | undefined>) {
    if (body.action !== 'allow' || !body.did) return showPicker(c, { status: 400, error: 'Choose Allow or Deny.' })
    const account = await usable(c.device, body.did, REMEMBERED_MAX_S)
    // prompt=login: only a password given during this request counts
    if (!account || (c.row.prompt === 'login' && account.authenticatedAt < c.row.created_at)) {
      return showLogin(c, account?.handle, { status: 401, error: 'Sign in again to continue.' })
    }
    return grant(c, account.did)
  }

  async function signupStep(c: Ctx, body: Record<string, string | undefined>) {
    const wait = await deps.passwords.spend(c.req, 'createAccount')
    if (wait !== undefined) return showSignup(c, body, tooMany(wait))
    const name = (body.name ?? '').trim().toLowerCase()
    const domain = config.handleDomains.includes(body.domain ?? '') ? body.domain! : config.handleDomains[0]
    const handle = !name || name.includes('.') ? name : `${name}${domain?.startsWith('.') ? '' : '.'}${domain ?? ''}`
    let created: { did: string; handle: string }
    try {
      created = await createFreshAccount(deps, {
        handle,
        email: body.email?.trim(),
        password: body.password,
        inviteCode: body.invite_code?.trim() || undefined,
      })
    } catch (err) {
      if (err instanceof XRPCError) return showSignup(c, body, { status: 400, error: err.message })
      throw err
    }
    await rememberAccount(db, c.device.id, created.did, { remember: body.remember === 'on', password: true, factor: false })
    return showConsent(c, created)
  }

  return r
}

function tooMany(waitS: number, what = 'attempts') {
  const minutes = Math.ceil(waitS / 60)
  const when = minutes <= 1 ? 'a minute' : minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
  return { status: 429, retryAfterS: waitS, error: `Too many ${what} for this account or from this network. Try again in ${when}.` }
}
