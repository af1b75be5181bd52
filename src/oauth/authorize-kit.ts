// What the rows of /oauth/authorize share: the pushed request a page works on, the app's view,
// the pages of the sign-in as answers (values the wrapper renders), and the way back to the app.
import type { Request, Response } from 'express'
import type { Services } from '../context.js'
import type { SafeHtml } from '../web/html.js'
import { messagePage, serverInfo } from '../web/layout.js'
import { csrfToken } from '../web/csrf.js'
import { deviceAccounts, type Device, type DeviceAccount } from '../web/devices.js'
import { signedIn } from '../web/sign-in/flow.js'
import type { ClientMetadata } from './clients.js'
import { consentWords, type PermissionSetInfo } from './consent-words.js'
import type { SpaceWords } from './space-types.js'
import { consentPage, loginPage, pickerPage, signupPage, type ClientView, type Flow } from './page.js'
import { passkeySignIn } from './factor-page.js'
import { randomId } from './tokens.js'
import { signUpUnavailable } from '../account/creation-policy.js'
import * as store from './store.js'

const CODE_TTL_S = 60
// a person working through the pages (a reset email, a sign-up) keeps the request alive this
// much longer after each page, up to a bound from when the app pushed it
const ACTIVITY_S = 10 * 60
const REQUEST_MAX_S = 60 * 60

export type AuthorizeDeps = Pick<
  Services,
  'config' | 'db' | 'oauth' | 'passwords' | 'mailer' | 'logger' | 'tokenKeys' | 'rotationKey' | 'outbound'
>
/** the permission sets behind a request's include: scopes, for the consent page, in the reader's language (Accept-Language) where a set has it */
export type PermissionSetsFor = (scope: string, acceptLanguage?: string) => Promise<PermissionSetInfo[]>
/** the scope a grant carries: include: scopes replaced by the permissions their sets grant */
export type ExpandScope = (scope: string) => Promise<string>
/** the declared names (in the reader's language where declared) and authority handles the consent page words `space:` permissions with */
export type SpaceWordsFor = (scope: string, acceptLanguage?: string) => Promise<SpaceWords>

/** what a row of the sign-in page answers */
export type Answer =
  | { kind: 'page'; html: SafeHtml; status?: number; retryAfterS?: number; httpsImages?: boolean; scripts?: boolean }
  /** back to the app (a code or an error), or to another page */
  | { kind: 'redirect'; to: string }
  /** the passkey script asked */
  | { kind: 'json'; status: number; body: unknown }

/** one page of one sign-in: the request, the device, the app */
export type Ctx = { req: Request; res: Response; row: store.OAuthRequest; device: Device; client: ClientView }
export type Shown = { status?: number; error?: string; notice?: string; retryAfterS?: number; scripts?: boolean }

const later = (s: number) => new Date(Date.now() + s * 1000).toISOString()

export function tooMany(waitS: number, what = 'attempts'): Shown {
  const minutes = Math.ceil(waitS / 60)
  const when = minutes <= 1 ? 'a minute' : minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
  return { status: 429, retryAfterS: waitS, error: `Too many ${what} for this account or from this network. Try again in ${when}.` }
}

export function authorizeKit(
  deps: AuthorizeDeps,
  permissionSets: PermissionSetsFor,
  expandScope: ExpandScope,
  spaceWords: SpaceWordsFor = async () => ({ typeNames: {}, handles: {} }),
) {
  const { config, db, oauth } = deps
  const server = serverInfo(config)

  const expired = (): Answer => ({
    kind: 'page',
    status: 400,
    html: messagePage(
      server,
      'Sign-in request expired',
      'This sign-in request is unknown or has expired. Go back to the app and start again.',
    ),
  })

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

  const show = (c: Ctx, page: (f: Flow) => SafeHtml, o: Shown = {}): Answer => ({
    kind: 'page',
    html: page(flow(c, o)),
    status: o.status,
    retryAfterS: o.retryAfterS,
    httpsImages: !!c.client.logoUri,
    scripts: o.scripts,
  })

  const showLogin = async (c: Ctx, handle: string | undefined, o: Shown = {}): Promise<Answer> => {
    const hasAccounts = (await deviceAccounts(db, c.device.id)).length > 0
    return show(c, (f) => loginPage(f, { handle, remember: true, hasAccounts, passkey: passkeySignIn(f) }), { ...o, scripts: true })
  }

  const redirectTo = (row: store.OAuthRequest, params: Record<string, string>): Answer => {
    const u = new URL(row.redirect_uri)
    u.searchParams.set('state', row.state)
    u.searchParams.set('iss', oauth.issuer)
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v)
    return { kind: 'redirect', to: u.href }
  }

  const signUpNotice = (): Shown => {
    const why = signUpUnavailable(config.accountCreation)
    return why ? { status: 403, error: why } : {}
  }

  return {
    server,
    expired,
    clientView,
    flow,
    show,
    showLogin,
    redirectTo,
    expandScope,

    /** the pushed request the page works on, kept alive while a person works through it */
    pendingRequest: async (req: Request): Promise<store.OAuthRequest | undefined> => {
      const requestUri = typeof req.query.request_uri === 'string' ? req.query.request_uri : undefined
      const row = requestUri ? await store.pendingRequest(db, requestUri) : undefined
      if (!row) return undefined
      if (typeof req.query.client_id === 'string' && req.query.client_id !== row.client_id) return undefined
      const until = Math.min(Date.now() + ACTIVITY_S * 1000, Date.parse(row.created_at) + REQUEST_MAX_S * 1000)
      if (until > Date.parse(row.expires_at)) await store.extendRequest(db, row, new Date(until).toISOString())
      return row
    },

    showPicker: async (c: Ctx, o: Shown = {}): Promise<Answer> => {
      const accounts = await deviceAccounts(db, c.device.id)
      if (!accounts.length) return showLogin(c, c.row.login_hint ?? undefined, o)
      return show(c, (f) => pickerPage(f, accounts, passkeySignIn(f)), { ...o, scripts: true })
    },

    showConsent: async (c: Ctx, account: { did: string; handle: string }, o: Shown = {}): Promise<Answer> => {
      // a set that stopped resolving since PAR is shown by its name alone; granting it then fails
      // the names a publisher declared per language are shown in the one the browser asks for
      const lang = c.req.headers['accept-language']
      const sets = await permissionSets(c.row.scope, lang).catch(() => [])
      const spaces = await spaceWords(c.row.scope, lang).catch(() => undefined)
      const words = consentWords(c.row.scope, sets, spaces)
      return show(c, (f) => consentPage(f, { did: account.did, handle: account.handle, words, scope: c.row.scope }), o)
    },

    // where no one may sign up (PDS_ACCOUNT_CREATION) the page says so before anyone fills it in
    showSignup: (c: Ctx, fields: Record<string, string | undefined> = {}, o: Shown = signUpNotice()): Answer =>
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
      ),

    /** the one way out with a code: the request is spent, whoever gets there first */
    grant: async (c: Ctx, did: string): Promise<Answer> => {
      let scope: string
      try {
        scope = await expandScope(c.row.scope)
      } catch (err) {
        // a set that resolved at PAR no longer does: the app learns why, nothing is granted
        await store.dropRequest(db, c.row.request_uri)
        const description = err instanceof Error ? err.message : 'A permission set could not be resolved'
        return redirectTo(c.row, { error: 'invalid_scope', error_description: description })
      }
      const code = randomId(32)
      if (!(await store.issueCode(db, { ...c.row, scope }, did, code, later(CODE_TTL_S)))) return expired()
      return redirectTo(c.row, { code })
    },

    /** an account signed in on this device whose sign-in still counts (the sign-in flow's one rule) */
    usable: async (device: Device, did: string, maxAgeS: number): Promise<DeviceAccount | undefined> =>
      (await signedIn(db, device.id, did, maxAgeS))?.session,

    hintMatches: (row: store.OAuthRequest, a: DeviceAccount): boolean => {
      const hint = row.login_hint?.trim().toLowerCase().replace(/^@/, '')
      return !!hint && (a.handle === hint || a.did === hint)
    },
  }
}
export type AuthorizeKit = ReturnType<typeof authorizeKit>
