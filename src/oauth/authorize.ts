// The pages of /oauth/authorize: pick an account remembered on this device (or type one), prove
// it on the one sign-in flow (web/sign-in: password, second factor or passkey), then allow or
// deny what the app asks for. Sign-up and a forgotten password happen inside the same flow. Each
// step is a row (web/rows.ts) naming its form token and rate budget, enforced by one wrapper;
// steps answer with values (authorize-kit.ts). The pushed request stays single use: one code at
// most, whatever the path through.
import { Router } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import { createFreshAccount } from '../account/create.js'
import { requestPasswordReset, resetPassword } from '../account/password.js'
import { sendPage } from '../web/headers.js'
import { messagePage } from '../web/layout.js'
import { deviceAccounts, forgetAccount, rememberAccount } from '../web/devices.js'
import { passwordStep as flowPassword, REMEMBERED_MAX_S } from '../web/sign-in/flow.js'
import { mountRows, type Row, type RowContext } from '../web/rows.js'
import { resetPage, resetRequestPage } from './page.js'
import { FACTOR_STEPS, factorSteps } from './factor-steps.js'
import {
  authorizeKit,
  tooMany,
  type Answer,
  type AuthorizeDeps,
  type Ctx,
  type ExpandScope,
  type PermissionSetsFor,
  type SpaceWordsFor,
} from './authorize-kit.js'
import * as store from './store.js'

export { REMEMBERED_MAX_S } from '../web/sign-in/flow.js'
export type { ExpandScope, PermissionSetsFor, SpaceWordsFor } from './authorize-kit.js'
export const PROMPTS = ['none', 'login', 'consent', 'select_account', 'create'] as const
const PATH = '/oauth/authorize'
/** the password and the factors: the login budgets, spent by the flow per account */
const LOGIN_STEPS = new Set(['login', 'factor', 'factor-passkey', 'passkey-password'])

export function authorizePages(
  deps: AuthorizeDeps,
  permissionSets: PermissionSetsFor = async () => [],
  expandScope: ExpandScope = async (scope) => scope,
  spaceWords?: SpaceWordsFor,
): Router {
  const { config, db } = deps
  const kit = authorizeKit(deps, permissionSets, expandScope, spaceWords)
  const { show, showLogin, showPicker, showConsent, showSignup, redirectTo, grant, usable, hintMatches } = kit
  const r = Router()
  const factors = factorSteps<Ctx>(deps, { flow: kit.flow, httpsImages: (c) => !!c.client.logoUri, showLogin, showConsent, tooMany })

  /** the page's context: the request the precheck found, and the app's view */
  const ctx = async (c: RowContext): Promise<Ctx> => {
    const row = c.res.locals.oauthRequest as store.OAuthRequest
    return { req: c.req, res: c.res, row, device: c.device, client: await kit.clientView(row.client_id) }
  }
  const step = (
    name: string,
    run: (c: Ctx, body: RowContext['fields'], rc: RowContext) => Promise<Answer>,
    rate?: Row<Answer>['rate'],
  ): Row<Answer> => ({
    method: 'post',
    path: PATH,
    step: name,
    gate: 'none',
    csrf: true,
    rate: rate ?? (LOGIN_STEPS.has(name) ? 'login' : undefined),
    run: async (rc) => run(await ctx(rc), rc.fields, rc),
  })

  // prompt=none: no page at all; a code only for an account signed in here that already granted
  // this app everything it asks for
  const silent = async (c: Ctx): Promise<Answer> => {
    const accounts = await deviceAccounts(db, c.device.id)
    const candidates = c.row.login_hint ? accounts.filter((a) => hintMatches(c.row, a)) : accounts
    const account = candidates.length === 1 ? await usable(c.device, candidates[0].did, REMEMBERED_MAX_S) : undefined
    if (!account) {
      await store.dropRequest(db, c.row.request_uri)
      return redirectTo(c.row, { error: 'login_required', error_description: 'No usable sign-in on this device' })
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
      return redirectTo(c.row, { error: 'consent_required', error_description: 'The app needs your consent' })
    }
    return grant(c, account.did)
  }

  const view = async (c: Ctx): Promise<Answer> => {
    const q = c.req.query
    const name = typeof q.view === 'string' ? q.view : undefined
    const row = c.row
    if (name === undefined && row.prompt === 'none') return silent(c)
    switch (name) {
      case 'login':
        return showLogin(c, (typeof q.handle === 'string' && q.handle) || (row.login_hint ?? undefined))
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
      const remembered = (await deviceAccounts(db, c.device.id)).find((a) => hintMatches(row, a))
      if (!remembered) return showLogin(c, row.login_hint)
    }
    return showPicker(c)
  }

  const rows: Row<Answer>[] = [
    { method: 'get', path: PATH, gate: 'none', csrf: false, run: async (rc) => view(await ctx(rc)) },
    step('deny', async (c) => {
      await store.dropRequest(db, c.row.request_uri)
      return redirectTo(c.row, { error: 'access_denied', error_description: 'The user denied access' })
    }),
    step('select', async (c, body) => {
      const remembered = (await deviceAccounts(db, c.device.id)).find((a) => a.did === body.did)
      if (!remembered) return showPicker(c, { status: 400, error: 'That account is no longer remembered on this device.' })
      const account = c.row.prompt === 'login' ? undefined : await usable(c.device, remembered.did, REMEMBERED_MAX_S)
      if (account) return showConsent(c, account)
      return showLogin(c, remembered.handle, { notice: 'Enter your password to continue.' })
    }),
    step('forget', async (c, body) => {
      if (body.did) await forgetAccount(db, c.device.id, body.did)
      return showPicker(c, { notice: 'The account was forgotten on this device.' })
    }),
    // the same budgets as createSession (per account and per address, before any hashing); the
    // main password only: an app password must not mint tokens with wider scopes than it has
    // itself. A form without the checkbox (an older page, a script) is not remembered.
    step('login', async (c, body, rc) => {
      const handle = (body.handle ?? '').trim()
      const input = { identifier: handle, password: body.password ?? '', remember: body.remember === 'on' }
      const out = await flowPassword(deps, { deviceId: c.device.id, place: c.row.request_uri }, input, rc.budget)
      if (out.kind === 'rateLimited') return showLogin(c, handle, tooMany(out.retryAfterS, 'sign-in attempts'))
      if (out.kind === 'refused') {
        return showLogin(c, handle, {
          status: 401,
          error: out.why === 'takendown' ? 'This account has been taken down.' : 'Wrong handle or password.',
        })
      }
      return factors.render(c, out)
    }),
    ...[...FACTOR_STEPS].map((name) => step(name, (c, body, rc) => factors.post(c, name, body, rc.budget))),
    step('consent', async (c, body) => {
      if (body.action !== 'allow' || !body.did) return showPicker(c, { status: 400, error: 'Choose Allow or Deny.' })
      const account = await usable(c.device, body.did, REMEMBERED_MAX_S)
      // prompt=login: only a sign-in during this request counts
      if (!account || (c.row.prompt === 'login' && account.authenticatedAt < c.row.created_at)) {
        return showLogin(c, account?.handle, { status: 401, error: 'Sign in again to continue.' })
      }
      return grant(c, account.did)
    }),
    step(
      'signup',
      async (c, body) => {
        const name = (body.name ?? '').trim().toLowerCase()
        const domain = config.handleDomains.includes(body.domain ?? '') ? body.domain! : config.handleDomains[0]
        const handle = !name || name.includes('.') ? name : `${name}${domain?.startsWith('.') ? '' : '.'}${domain ?? ''}`
        let created: { did: string; handle: string }
        try {
          const input = { handle, email: body.email?.trim(), password: body.password, inviteCode: body.invite_code?.trim() || undefined }
          created = await createFreshAccount(deps, input)
        } catch (err) {
          if (err instanceof XRPCError) return showSignup(c, body, { status: 400, error: err.message })
          throw err
        }
        await rememberAccount(db, c.device.id, created.did, { remember: body.remember === 'on', password: true, factor: false })
        return showConsent(c, created)
      },
      'createAccount',
    ),
    step(
      'reset-request',
      async (c, body) => {
        if (!body.email?.trim()) return show(c, (f) => resetRequestPage(f, body), { status: 400, error: 'Enter your email address.' })
        await requestPasswordReset(deps, body.email)
        return show(c, (f) => resetPage(f), {
          notice: 'If an account uses that address, we sent it a code. It is valid for a limited time.',
        })
      },
      'resetPassword',
    ),
    step(
      'reset',
      async (c, body) => {
        try {
          await resetPassword(deps, (body.token ?? '').trim().toUpperCase(), body.password ?? '')
        } catch (err) {
          if (!(err instanceof XRPCError)) throw err
          const error = err.customErrorName === 'InvalidToken' ? 'That code is wrong or has expired.' : err.message
          return show(c, (f) => resetPage(f), { status: 400, error })
        }
        return showLogin(c, undefined, { notice: 'Your password was changed. Sign in with the new one.' })
      },
      'resetPassword',
    ),
  ]

  mountRows<Answer>(
    r,
    { db, config, passwords: deps.passwords, freshS: 0 },
    {
      // no row of this page is gated: consent checks the device's sign-in itself
      signedIn: async () => undefined,
      precheck: async (req, res) => {
        const row = await kit.pendingRequest(req)
        if (!row) return kit.expired()
        res.locals.oauthRequest = row
        return undefined
      },
      // Cancel is a button of several forms; a form with a handle and no step is the password form
      stepOf: (f) => (f.action === 'deny' || f.step === 'deny' ? 'deny' : (f.step ?? (f.handle !== undefined ? 'login' : undefined))),
      unknownStep: async (rc) => showPicker(await ctx(rc), { status: 400, error: 'Choose an account, or Cancel.' }),
      async refuse(why, row, at) {
        if (why.why === 'badForm')
          return { kind: 'page', status: 400, html: messagePage(kit.server, 'Bad request', 'Each form field may be given once.') }
        if (why.why !== 'rateLimited' || !at.device) {
          const text = 'This sign-in form is no longer valid. Reload the page and try again.'
          return { kind: 'page', status: 403, html: messagePage(kit.server, 'Form expired', text) }
        }
        if (why.budget === 'pageAccount') {
          const shown = tooMany(why.retryAfterS, 'requests')
          return {
            kind: 'page',
            status: 429,
            retryAfterS: why.retryAfterS,
            html: messagePage(kit.server, 'Too many requests', shown.error!),
          }
        }
        const c = await ctx({ ...at, device: at.device, fields: at.fields ?? {}, budget: { attempt: async () => undefined } })
        const body = at.fields ?? {}
        if (row.step === 'signup') return showSignup(c, body, tooMany(why.retryAfterS))
        if (row.step === 'reset') return show(c, (f) => resetPage(f), tooMany(why.retryAfterS))
        return show(c, (f) => resetRequestPage(f, body), tooMany(why.retryAfterS))
      },
      render(res, _device, a) {
        if (a.kind === 'page')
          return sendPage(res, a.html, { status: a.status, retryAfterS: a.retryAfterS, httpsImages: a.httpsImages, scripts: a.scripts })
        res.setHeader('Cache-Control', 'no-store')
        if (a.kind === 'json') return void res.status(a.status).json(a.body)
        res.redirect(302, a.to)
      },
    },
    rows,
  )
  return r
}
