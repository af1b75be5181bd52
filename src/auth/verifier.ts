// Turns a registry row into the verifier xrpc-server runs before the handler: the token checks
// (access, refresh, optional), HTTP Basic for admin, then the status gate, the
// privileged-only and session-only columns, and whether the token was revoked since it was minted.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { MethodAuthContext } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import { getAccountWithHead, getRefreshRecord, type AccountWithHead } from '../account/store.js'
import { statusGateError, xrpcError } from '../errors.js'
import { rowFor, type Call, type MethodId, type Row, type RowOf } from './registry.js'
import { missingMessage, missingPermission, permissionsOf } from './permissions.js'
import { TAKENDOWN_SCOPE, verifySessionToken, type AppPasswordClaim } from '../account/session-tokens.js'
import { isRevoked } from '../account/revocation.js'
import { checkDpopProof, DpopBusy, DpopError, DpopNonceRequired, rememberDpopProof } from '../jwt/dpop.js'
import { decodeParts } from '../jwt/es256k.js'
import { ReplayStoreUnavailable } from '../jwt/replay.js'
import { verifyOAuthToken } from '../oauth/tokens.js'
import { verifyMigrationToken, type MigrationCredentials } from '../move/origin.js'
import { verifyServiceToken, type ServiceCredentials } from './service-auth.js'
import { defaultServiceRef } from '../proxy/targets.js'
import {
  carriesSpaceCredential,
  delegationAuth,
  spaceCredentialAuth,
  type DelegationCredentials,
  type SpaceCredentialCredentials,
} from './space-credential.js'

export type AccessCredentials = {
  type: 'access'
  did: string
  account: AccountWithHead
  /** 'session' for Bearer tokens (fully privileged scope), the granted scope for OAuth */
  scope: string
  appPassword?: AppPasswordClaim
  /** OAuth callers: the thumbprint of the DPoP key the token is bound to */
  oauth?: { jkt: string }
}
export type RefreshCredentials = {
  type: 'refresh'
  did: string
  account: AccountWithHead
  jti: string
  appPasswordName: string | null
}
/** an account of this server acting through a service token it minted for this method (the
 *  video service uploading for the user) */
export type UserServiceCredentials = { type: 'userService'; did: string; account: AccountWithHead }
/** the moderation service (PDS_MOD_SERVICE_DID), by its service token */
export type ModServiceCredentials = { type: 'modService'; iss: string }
export type Credentials =
  | { type: 'none' }
  | { type: 'admin' }
  | AccessCredentials
  | RefreshCredentials
  | MigrationCredentials
  | ServiceCredentials
  | UserServiceCredentials
  | ModServiceCredentials
  | SpaceCredentialCredentials
  | DelegationCredentials

export type AuthOutput<C extends Credentials = Credentials> = { credentials: C }
/** what a handler's `auth` is, by the check its registry row names */
export type AccessAuth = AuthOutput<AccessCredentials>
export type RefreshAuth = AuthOutput<RefreshCredentials>
export type OptionalAuth = AuthOutput<AccessCredentials | { type: 'none' }>
export type AdminAuth = AuthOutput<{ type: 'admin' }>
/** the moderator methods: the admin, or the moderation service */
export type ModeratorAuth = AuthOutput<{ type: 'admin' } | ModServiceCredentials>
/** access rows with serviceAuth: a session or OAuth token, or the account's own service token */
export type AccessOrServiceAuth = AuthOutput<AccessCredentials | UserServiceCredentials>
/** public reads that also take requestAccountMigrate's migration token (registry column migrationToken) */
export type MigrationAuth = AuthOutput<MigrationCredentials | { type: 'none' }>
/** methods whose row has serviceAuth: anonymous, or another server's service-auth JWT */
export type ServiceAuth = AuthOutput<ServiceCredentials | { type: 'none' } | { type: 'admin' }>
export type NoneAuth = AuthOutput<{ type: 'none' }>

type AuthByCheck = {
  none: NoneAuth
  access: AccessAuth
  optional: OptionalAuth
  refresh: RefreshAuth
  admin: AdminAuth
  moderator: ModeratorAuth
  spaceCredential: AuthOutput<SpaceCredentialCredentials>
  delegation: AuthOutput<DelegationCredentials>
  spaceNotify: AuthOutput<ServiceCredentials>
}
/** a handler's `auth`, as its registry row decides: `AuthFor<'com.atproto.server.getSession'>` is
 *  AccessAuth because that row's check is 'access' */
export type AuthFor<M extends MethodId> =
  RowOf<M> extends { migrationToken: true }
    ? MigrationAuth
    : RowOf<M> extends { serviceAuth: true; check: 'access' }
      ? AccessOrServiceAuth
      : RowOf<M> extends { serviceAuth: true }
        ? ServiceAuth
        : RowOf<M> extends { spaceCredential: true; check: 'access' }
          ? AuthOutput<AccessCredentials | SpaceCredentialCredentials>
          : AuthByCheck[RowOf<M>['check']]

export type VerifierDeps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'oauth'> & Partial<Pick<Services, 'passwords' | 'didResolver'>>

export function createVerifier(nsid: string, deps: VerifierDeps) {
  const row = rowFor(nsid)
  const none = async (): Promise<AuthOutput> => ({ credentials: { type: 'none' } })
  switch (row.check) {
    case 'none':
      if (row.serviceAuth) {
        return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
          const header = ctx.req.headers.authorization
          if (!header) return none()
          const { scheme, token } = bearer(header)
          if (scheme === 'basic' && row.adminBasic) {
            await verifyAdmin(ctx, deps)
            return { credentials: { type: 'admin' } }
          }
          if (scheme !== 'bearer') throw xrpcError('InvalidToken', 'Unexpected authorization type')
          return { credentials: await verifyServiceToken(deps, token, nsid) }
        }
      }
      if (!row.migrationToken) return none
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
        const header = ctx.req.headers.authorization
        if (!header || !/^bearer /i.test(header)) return none()
        const creds = await verifyMigrationToken(deps, header.slice(7).trim())
        return { credentials: creds ?? { type: 'none' } }
      }
    case 'admin':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
        await verifyAdmin(ctx, deps)
        return { credentials: { type: 'admin' } }
      }
    case 'moderator':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
        if (bearer(ctx.req.headers.authorization).scheme !== 'bearer') {
          await verifyAdmin(ctx, deps)
          return { credentials: { type: 'admin' } }
        }
        return { credentials: await modService(ctx, nsid, deps) }
      }
    case 'spaceCredential':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => ({ credentials: await spaceCredentialAuth(ctx, deps) })
    case 'delegation':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => ({ credentials: await delegationAuth(ctx, deps) })
    case 'spaceNotify':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
        const { scheme, token } = bearer(ctx.req.headers.authorization)
        if (scheme !== 'bearer') throw xrpcError('InvalidToken', 'Unexpected authorization type')
        return { credentials: await verifyServiceToken(deps, token, nsid, { anyAudience: true }) }
      }
    case 'access':
      if (row.spaceCredential) {
        return async (ctx: MethodAuthContext): Promise<AuthOutput> =>
          carriesSpaceCredential(ctx) ? { credentials: await spaceCredentialAuth(ctx, deps) } : access(ctx, row, deps, nsid)
      }
      if (row.serviceAuth) {
        return (ctx: MethodAuthContext) => (isServiceToken(ctx) ? userService(ctx, nsid, row, deps) : access(ctx, row, deps, nsid))
      }
      return (ctx: MethodAuthContext) => access(ctx, row, deps, nsid)
    case 'optional':
      return (ctx: MethodAuthContext) => (ctx.req.headers.authorization ? access(ctx, row, deps, nsid) : none())
    case 'refresh':
      return (ctx: MethodAuthContext) => refresh(ctx, row, deps)
  }
}

/** whether the caller may read the account's email address: every password session, and OAuth
 *  apps only when the user granted `account:email` or `transition:email` */
export function mayReadEmail(creds: AccessCredentials): boolean {
  if (!creds.oauth) return true
  return permissionsOf(creds.scope).allowsAccount({ attr: 'email', action: 'read' })
}

/**
 * The access check for a request that reaches no handler (service proxying): the same checks
 * as a registry row's, so the proxy never reads the Authorization header itself. The proxy's
 * row names the `rpc:` permission the forwarded call needs.
 */
export async function verifyAccessRequest(
  req: MethodAuthContext['req'],
  res: MethodAuthContext['res'],
  deps: VerifierDeps,
  row: Row,
): Promise<AccessCredentials> {
  const out = await access({ req, res, params: {} }, row, deps)
  return out.credentials as AccessCredentials
}

/** a Bearer token naming a method (`lxm`) is a service token: session tokens never carry one */
function isServiceToken(ctx: MethodAuthContext): boolean {
  const header = ctx.req.headers.authorization
  if (!header || !/^bearer /i.test(header)) return false
  const payload = decodeParts(header.slice(7).trim())?.payload
  return payload?.lxm !== undefined
}

// the account's own service token for this very method: its account goes through the row's gate
async function userService(ctx: MethodAuthContext, nsid: string, row: Row, deps: VerifierDeps): Promise<AuthOutput> {
  const creds = await verifyServiceToken(deps, bearer(ctx.req.headers.authorization).token, nsid)
  const account = await getAccountWithHead(deps.db, creds.did)
  if (!account) throw xrpcError('InvalidToken', 'The token names no account of this server')
  const admitted: string[] = row.statuses ?? ['active']
  if (!admitted.includes(account.status)) throw statusGateError(account.status)
  return { credentials: { type: 'userService', did: account.did, account } }
}

// the moderation service: its DID, or its labeler identity (`did#atproto_labeler`)
async function modService(ctx: MethodAuthContext, nsid: string, deps: VerifierDeps): Promise<ModServiceCredentials> {
  const mod = deps.config.modService
  if (!mod) throw xrpcError('UntrustedIss', 'No moderation service is configured on this server')
  const { token } = bearer(ctx.req.headers.authorization)
  const creds = await verifyServiceToken(deps, token, nsid, { issuers: [mod.did, `${mod.did}#atproto_labeler`] })
  return { type: 'modService', iss: creds.iss }
}

function bearer(header: string | undefined): { scheme: string; token: string } {
  if (!header) throw xrpcError('AuthMissing', 'Authentication Required')
  const space = header.indexOf(' ')
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase()
  const token = space < 0 ? '' : header.slice(space + 1).trim()
  if (!token) throw xrpcError('InvalidToken', 'Malformed authorization header')
  return { scheme, token }
}

async function access(ctx: MethodAuthContext, row: Row, deps: VerifierDeps, nsid?: string): Promise<AuthOutput> {
  const { scheme, token } = bearer(ctx.req.headers.authorization)
  if (scheme === 'dpop') return oauthAccess(ctx, token, row, deps, nsid)
  if (scheme !== 'bearer') throw xrpcError('InvalidToken', 'Unexpected authorization type')
  const claims = await verifySessionToken(deps.tokenKeys, token, 'access')
  // a taken-down account's session reaches only the rows that admit taken-down accounts
  if (claims.scope === TAKENDOWN_SCOPE && !row.statuses?.includes('takendown')) throw xrpcError('InvalidToken', 'Bad token scope')
  const account = await liveAccount(deps, claims.sub, row)
  if (isRevoked(account, claims.gen, claims.app_password)) throw xrpcError('ExpiredToken', 'Token has been revoked')
  if (claims.app_password && !claims.app_password.privileged && isPrivileged(row, ctx.params)) {
    throw xrpcError('InsufficientScope', 'This method needs a privileged app password or the main password')
  }
  return {
    credentials: { type: 'access', did: account.did, account, scope: 'session', appPassword: claims.app_password },
  }
}

// the OAuth access token, its DPoP proof, the status gate, the scope
async function oauthAccess(ctx: MethodAuthContext, token: string, row: Row, deps: VerifierDeps, nsid?: string): Promise<AuthOutput> {
  const verified = await verifyOAuthToken(deps.oauth, token, 'access')
  if (!verified.ok) {
    // RFC 6750 §3: official clients refresh on this challenge and retry
    ctx.res?.setHeader(
      'WWW-Authenticate',
      `DPoP error="invalid_token", error_description="${verified.why === 'expired' ? 'Token has expired' : 'Invalid token'}"`,
    )
    throw verified.why === 'expired'
      ? xrpcError('ExpiredToken', 'Token has expired')
      : xrpcError('InvalidToken', 'Token could not be verified')
  }
  const claims = verified.claims
  const req = ctx.req
  if (req.headers.dpop === undefined) throw xrpcError('AuthMissing', 'A DPoP proof is required with a DPoP token')
  let jkt: string
  try {
    const proof = await checkDpopProof({
      proof: req.headers.dpop,
      method: req.method ?? 'GET',
      url: deps.config.publicUrl + (req.originalUrl ?? req.url ?? '').split('?')[0],
      accessToken: token,
      nonces: deps.oauth.nonces,
    })
    jkt = proof.jkt
    if (jkt !== claims.cnf.jkt) throw xrpcError('InvalidToken', 'DPoP proof key does not match the token')
    // recorded only now that the token verified and is bound to this key
    await rememberDpopProof(proof, deps.oauth.replay)
  } catch (err) {
    if (err instanceof DpopError) {
      ctx.res?.setHeader('WWW-Authenticate', 'DPoP error="invalid_dpop_proof"')
      throw xrpcError('InvalidToken', err.message)
    }
    if (err instanceof DpopNonceRequired) {
      // RFC 9449 §9: the resource server's challenge; DPoP-Nonce is already on the response
      ctx.res?.setHeader('WWW-Authenticate', `DPoP error="use_dpop_nonce", error_description="${err.message}"`)
      throw xrpcError('use_dpop_nonce', err.message)
    }
    if (err instanceof DpopBusy) {
      ctx.res?.setHeader('Retry-After', '5')
      throw xrpcError('RateLimitExceeded', 'Too many DPoP proofs right now; try again shortly')
    }
    if (err instanceof ReplayStoreUnavailable) {
      ctx.res?.setHeader('Retry-After', '5')
      throw xrpcError('TemporarilyUnavailable', 'DPoP proofs cannot be checked for replay right now; try again shortly')
    }
    throw err
  }
  const account = await liveAccount(deps, claims.sub, row)
  if (isRevoked(account, claims.gen, undefined, { jkt: claims.cnf.jkt, iat: claims.iat })) {
    ctx.res?.setHeader('WWW-Authenticate', 'DPoP error="invalid_token", error_description="Token has been revoked"')
    throw xrpcError('ExpiredToken', 'Token has been revoked')
  }
  if (typeof row.sessionOnly === 'function' ? row.sessionOnly(ctx.params) : row.sessionOnly) {
    throw xrpcError('InsufficientScope', 'This is not available to OAuth apps; sign in with the account password')
  }
  if (row.permissions) {
    const needs = typeof row.permissions === 'function' ? row.permissions(callOf(ctx, deps, nsid)) : row.permissions
    const missing = missingPermission(claims.scope, needs, claims.sub)
    if (missing) throw xrpcError('InsufficientScope', missingMessage(missing))
  }
  return {
    credentials: { type: 'access', did: account.did, account, scope: claims.scope, oauth: { jkt } },
  }
}

function callOf(ctx: MethodAuthContext, deps: VerifierDeps, nsid = ''): Call {
  const type = ctx.req.headers['content-type']
  const proxy = ctx.req.headers['atproto-proxy']
  return {
    params: ctx.params,
    contentType: type ? type.split(';')[0].trim().toLowerCase() : undefined,
    appView: appViewRef(deps.config),
    proxyTo: typeof proxy === 'string' ? proxy : (defaultServiceRef(nsid, deps.config) ?? appViewRef(deps.config)),
  }
}

/** the AppView as apps name it in `rpc:` permissions; without one configured, the network's own */
const appViewRef = (config: VerifierDeps['config']) => `${config.appView?.did ?? 'did:web:api.bsky.app'}#bsky_appview`

/**
 * The permissions a call's input body decides (the registry column `bodyPermissions`), checked
 * for OAuth callers once xrpc-server has parsed and validated the body and before the handler
 * runs. Throws 403 InsufficientScope naming the first missing one.
 */
export function checkBodyPermissions(row: Row, auth: unknown, input: unknown): void {
  if (!row.bodyPermissions) return
  const creds = (auth as AuthOutput | undefined)?.credentials
  if (creds?.type !== 'access' || !creds.oauth) return
  const body = (input as { body?: unknown } | undefined)?.body
  const needs = row.bodyPermissions(body && typeof body === 'object' ? (body as Record<string, unknown>) : {}, creds.did)
  const missing = missingPermission(creds.scope, needs, creds.did)
  if (missing) throw xrpcError('InsufficientScope', missingMessage(missing))
}

async function refresh(ctx: MethodAuthContext, row: Row, deps: VerifierDeps): Promise<AuthOutput> {
  const { scheme, token } = bearer(ctx.req.headers.authorization)
  if (scheme !== 'bearer') throw xrpcError('InvalidToken', 'Unexpected authorization type')
  const claims = await verifySessionToken(deps.tokenKeys, token, 'refresh')
  const record = await getRefreshRecord(deps.db, claims.jti)
  // a rotated (or logged-out) refresh token is ExpiredToken
  if (!record || record.did !== claims.sub || record.kind !== 'session') {
    throw xrpcError('ExpiredToken', 'Token has been revoked')
  }
  const account = await liveAccount(deps, claims.sub, row)
  return {
    credentials: {
      type: 'refresh',
      did: account.did,
      account,
      jti: claims.jti,
      appPasswordName: record.app_password_name,
    },
  }
}

async function liveAccount(deps: VerifierDeps, did: string, row: Row): Promise<AccountWithHead> {
  const account = await getAccountWithHead(deps.db, did)
  if (!account) throw xrpcError('InvalidToken', 'Token subject has no account')
  const admitted: string[] = row.statuses ?? ['active']
  if (!admitted.includes(account.status)) throw statusGateError(account.status)
  return account
}

function isPrivileged(row: Row, params: Record<string, unknown>): boolean {
  return typeof row.privileged === 'function' ? row.privileged(params) : !!row.privileged
}

const digest = (s: string) => createHash('sha256').update(s).digest()

async function verifyAdmin(ctx: MethodAuthContext, { config, passwords }: VerifierDeps) {
  const password = config.adminPassword
  if (!password) throw xrpcError('AuthenticationRequired', 'The admin API is off on this server')
  const { scheme, token } = bearer(ctx.req.headers.authorization)
  if (scheme !== 'basic') throw xrpcError('InvalidToken', 'Unexpected authorization type')
  // every try counts before the comparison (against the address and against everybody), so an
  // address or a crowd that spent its budget may not guess again, right or wrong
  const wait = await passwords?.adminAttempt(ctx.req as never)
  if (wait !== undefined) throw tooManyAttempts(ctx, wait)
  const given = Buffer.from(token, 'base64').toString('utf8')
  // equal-length digests: the comparison costs the same whatever the guess
  if (!timingSafeEqual(digest(given), digest(`admin:${password}`))) {
    throw xrpcError('AuthenticationRequired', 'Invalid admin credentials')
  }
  await passwords?.adminSucceeded(ctx.req as never)
}

function tooManyAttempts(ctx: MethodAuthContext, waitS: number) {
  ctx.res?.setHeader('Retry-After', String(waitS))
  return xrpcError('RateLimitExceeded', 'Too many failed attempts; try again later')
}
