// The authorization server's HTTP surface: discovery, the key set, PAR,
// the sign-in page, the token endpoint and revocation. Errors follow RFC 6749 §5.2
// (`{error, error_description}`), never XRPC bodies. Rows live in oauth/store.ts; the sign-in
// form's password check is account/login.ts, the one createSession uses.
import { createHash } from 'node:crypto'
import express, { Router, type NextFunction, type Request, type Response } from 'express'
import { base64url } from 'jose'
import { isAtprotoOauthScope, STATIC_SCOPE_VALUES } from '@atproto/oauth-scopes'
import type { Services } from '../context.js'
import { ClientError, type ClientMetadata } from './clients.js'
import { checkDpopProof, DpopBusy, DpopError, DpopNonceRequired, rememberDpopProof, type CheckedProof } from '../jwt/dpop.js'
import { ReplayStoreUnavailable } from '../jwt/replay.js'
import { authorizePages, PROMPTS } from './authorize.js'
import { endGrant } from '../account/revocation.js'
import { mintOAuthPair, OAUTH_ACCESS_TTL_S, randomId, verifyOAuthToken } from './tokens.js'
import { describePermissionSets, expandPermissionSets, isIncludeScope, PermissionSetError, PermissionSets } from './permission-sets.js'
import { checkSpaceScopes, SpaceTypeError, SpaceTypes, spaceWords, tokenScope } from './space-types.js'
import { isSpaceScope, parseSpaceScope, SpaceScopeError } from '../space/scope.js'
import * as store from './store.js'

/** the static scope values; every `repo:`, `rpc:`, `blob:`, `account:`, `identity:`, `include:` and `space:` form is accepted too */
export const SCOPES_SUPPORTED: readonly string[] = STATIC_SCOPE_VALUES
const PAR_TTL_S = 60
const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:'

type Deps = Pick<
  Services,
  'config' | 'db' | 'oauth' | 'passwords' | 'mailer' | 'logger' | 'tokenKeys' | 'rotationKey' | 'outbound' | 'didResolver'
>

class OAuthError extends Error {
  constructor(
    public status: number,
    public error: string,
    public description: string,
  ) {
    super(description)
  }
}

const later = (s: number) => new Date(Date.now() + s * 1000).toISOString()
const nowIso = () => new Date().toISOString()

export function oauthRoutes(deps: Deps): Router {
  const { config, db, oauth } = deps
  const r = Router()
  const sets = new PermissionSets(deps)
  const spaceTypes = new SpaceTypes(sets.lexicons)
  // what a grant holds: sets expanded, and every space type named resolvable (else invalid_scope)
  const grantable = async (scope: string) => {
    const expanded = await expandPermissionSets(scope, sets)
    await checkSpaceScopes(expanded, spaceTypes)
    return expanded
  }
  const form = express.urlencoded({ extended: false, limit: '64kb' })
  const endpoint = (path: string) => `${config.publicUrl}${path}`

  r.get('/.well-known/oauth-protected-resource', (_req, res) => {
    res.json({
      resource: config.publicUrl,
      authorization_servers: [oauth.issuer],
      scopes_supported: SCOPES_SUPPORTED,
      bearer_methods_supported: ['header'],
      resource_documentation: 'https://atproto.com',
    })
  })

  r.get('/.well-known/oauth-authorization-server', (_req, res) => {
    res.json({
      issuer: oauth.issuer,
      authorization_endpoint: endpoint('/oauth/authorize'),
      token_endpoint: endpoint('/oauth/token'),
      pushed_authorization_request_endpoint: endpoint('/oauth/par'),
      require_pushed_authorization_requests: true,
      revocation_endpoint: endpoint('/oauth/revoke'),
      jwks_uri: endpoint('/oauth/jwks'),
      scopes_supported: SCOPES_SUPPORTED,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      dpop_signing_alg_values_supported: ['ES256K', 'ES256'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
      protected_resources: [config.publicUrl],
      subject_types_supported: ['public'],
    })
  })

  r.get('/oauth/jwks', (_req, res) => {
    res.json({ keys: [oauth.key.jwk] })
  })

  const dpopError = (err: unknown): never => {
    if (err instanceof DpopError) throw new OAuthError(400, 'invalid_dpop_proof', err.message)
    // RFC 9449 §8: the official clients retry once with the DPoP-Nonce this response carries
    if (err instanceof DpopNonceRequired) throw new OAuthError(400, 'use_dpop_nonce', err.message)
    if (err instanceof DpopBusy) throw new OAuthError(429, 'temporarily_unavailable', err.message)
    if (err instanceof ReplayStoreUnavailable) {
      throw new OAuthError(503, 'temporarily_unavailable', 'DPoP proofs cannot be checked for replay right now; try again shortly')
    }
    throw err
  }
  const dpopFor = (req: Request) =>
    checkDpopProof({
      proof: req.headers.dpop,
      method: req.method,
      url: endpoint(req.originalUrl.split('?')[0]),
      nonces: oauth.nonces,
    }).catch(dpopError)
  const remember = (proof: CheckedProof) => rememberDpopProof(proof, oauth.replay).catch(dpopError)

  const resolveClient = (clientId: string) =>
    oauth.clients.resolve(clientId).catch((err) => {
      if (err instanceof ClientError) throw new OAuthError(400, 'invalid_client', err.message)
      throw err
    })

  r.post(
    '/oauth/par',
    form,
    handle(async (req, res) => {
      const p = params(req.body)
      const client = await resolveClient(need(p, 'client_id'))
      if (need(p, 'response_type') !== 'code') throw new OAuthError(400, 'unsupported_response_type', 'response_type must be code')
      const redirectUri = need(p, 'redirect_uri')
      if (!redirectAllowed(client, redirectUri))
        throw new OAuthError(400, 'invalid_request', 'redirect_uri is not registered for this client')
      const scope = checkScope(need(p, 'scope'), client)
      // every permission set and space type asked for must resolve now; the page and the code reuse the cached answer
      await grantable(scope).catch((err) => {
        throw err instanceof PermissionSetError || err instanceof SpaceTypeError ? new OAuthError(400, 'invalid_scope', err.message) : err
      })
      const state = need(p, 'state')
      if (state.length > 1024) throw new OAuthError(400, 'invalid_request', 'state is too long')
      const challenge = need(p, 'code_challenge')
      if (need(p, 'code_challenge_method') !== 'S256') throw new OAuthError(400, 'invalid_request', 'code_challenge_method must be S256')
      if (!/^[A-Za-z0-9_-]{43}$/.test(challenge))
        throw new OAuthError(400, 'invalid_request', 'code_challenge must be base64url(SHA-256(code_verifier))')
      if (p.response_mode !== undefined && p.response_mode !== 'query')
        throw new OAuthError(400, 'invalid_request', 'response_mode must be query')
      if (p.prompt !== undefined && !(PROMPTS as readonly string[]).includes(p.prompt))
        throw new OAuthError(400, 'invalid_request', `prompt must be one of ${PROMPTS.join(', ')}`)
      if (p.login_hint !== undefined && p.login_hint.length > 256) throw new OAuthError(400, 'invalid_request', 'login_hint is too long')
      // the key comes from a dpop_jkt parameter or a DPoP proof; both must agree; one is required. The
      // proof's jti is not recorded: replaying it gains nothing that naming its key in dpop_jkt
      // would not, and recording would let anyone fill the replay store with fresh keys.
      let jkt = p.dpop_jkt
      if (req.headers.dpop !== undefined) {
        const proof = await dpopFor(req)
        if (jkt !== undefined && jkt !== proof.jkt)
          throw new OAuthError(400, 'invalid_request', 'dpop_jkt does not match the DPoP proof key')
        jkt = proof.jkt
      }
      if (!jkt) throw new OAuthError(400, 'invalid_request', 'dpop_jkt or a DPoP proof is required')
      if (!/^[A-Za-z0-9_-]{43}$/.test(jkt)) throw new OAuthError(400, 'invalid_request', 'dpop_jkt must be a JWK SHA-256 thumbprint')

      const requestUri = REQUEST_URI_PREFIX + randomId()
      await store.saveRequest(db, {
        request_uri: requestUri,
        client_id: client.client_id,
        redirect_uri: redirectUri,
        scope,
        state,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        dpop_jkt: jkt,
        login_hint: p.login_hint || null,
        prompt: p.prompt || null,
        expires_at: later(PAR_TTL_S),
      })
      res.status(201).json({ request_uri: requestUri, expires_in: PAR_TTL_S })
    }),
  )

  r.use(
    authorizePages(
      deps,
      (scope, lang) => describePermissionSets(scope, sets, lang),
      grantable,
      async (scope, lang) => spaceWords(await expandPermissionSets(scope, sets), spaceTypes, deps, lang),
    ),
  )

  r.post(
    '/oauth/token',
    form,
    handle(async (req, res) => {
      const p = params(req.body)
      const grant = need(p, 'grant_type')
      if (grant !== 'authorization_code' && grant !== 'refresh_token') {
        throw new OAuthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token')
      }
      // first, for both grants: the DPoP proof, against POST and this URL
      const proof = await dpopFor(req)
      const out = grant === 'authorization_code' ? await codeGrant(p, proof) : await refreshGrant(p, proof)
      res.setHeader('Cache-Control', 'no-store')
      res.json({
        access_token: out.access,
        token_type: 'DPoP',
        expires_in: OAUTH_ACCESS_TTL_S,
        refresh_token: out.refresh,
        scope: out.scope,
        sub: out.sub,
      })
    }),
  )

  async function codeGrant(p: Record<string, string | undefined>, proof: CheckedProof) {
    const { jkt } = proof
    const code = need(p, 'code')
    const verifier = need(p, 'code_verifier')
    const redirectUri = need(p, 'redirect_uri')
    const clientId = need(p, 'client_id')
    const row = await store.getCode(db, code)
    if (!row || row.used || row.expires_at <= nowIso()) throw new OAuthError(400, 'invalid_grant', 'Invalid or expired authorization code')
    if (row.dpop_jkt !== jkt) throw new OAuthError(400, 'invalid_grant', 'The DPoP key differs from the one bound at authorization')
    // recorded once the proof's key is the one the code is bound to
    await remember(proof)
    // the token's form of the grant; a declaration gone since the consent refuses the code
    let issued = row.scope
    let unresolved: OAuthError | undefined
    try {
      issued = await tokenScope(row.scope, row.did, spaceTypes)
    } catch (err) {
      if (!(err instanceof SpaceTypeError)) throw err
      unresolved = new OAuthError(400, 'invalid_scope', err.message)
    }
    // checked once the code is burnt, all in one transaction: a code that fails a check is spent
    const redeemed = await store.redeemCode(
      db,
      row,
      () => {
        if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier) || pkceChallenge(verifier) !== row.code_challenge) {
          return new OAuthError(400, 'invalid_grant', 'code_verifier does not match the code_challenge')
        }
        if (redirectUri !== row.redirect_uri)
          return new OAuthError(400, 'invalid_grant', 'redirect_uri does not match the authorization request')
        if (clientId !== row.client_id) return new OAuthError(400, 'invalid_grant', 'client_id does not match the authorization request')
        return unresolved
      },
      (gen) => mintOAuthPair(oauth, row.did, issued, jkt, gen),
    )
    if (!redeemed.ok) {
      if (redeemed.refused === 'used') throw new OAuthError(400, 'invalid_grant', 'Invalid or expired authorization code')
      if (redeemed.refused === 'account') throw new OAuthError(400, 'invalid_grant', 'The account is not available')
      throw redeemed.refused
    }
    return { ...redeemed.pair, scope: issued, sub: row.did }
  }

  async function refreshGrant(p: Record<string, string | undefined>, proof: CheckedProof) {
    const { jkt } = proof
    const token = need(p, 'refresh_token')
    const clientId = need(p, 'client_id')
    const verified = await verifyOAuthToken(oauth, token, 'refresh')
    if (!verified.ok)
      throw new OAuthError(400, 'invalid_grant', verified.why === 'expired' ? 'Refresh token expired' : 'Invalid refresh token')
    const claims = verified.claims
    if (claims.cnf.jkt !== jkt) throw new OAuthError(400, 'invalid_grant', 'The refresh token is bound to another DPoP key')
    // recorded once the proof's key is the one the refresh token is bound to
    await remember(proof)
    const record = await store.getOAuthRefresh(db, claims.jti)
    if (!record || record.kind !== 'oauth' || record.did !== claims.sub || record.dpop_jkt !== jkt) {
      throw new OAuthError(400, 'invalid_grant', 'Refresh token has been revoked or already used')
    }
    if (record.client_id && record.client_id !== clientId) throw new OAuthError(400, 'invalid_grant', 'client_id does not match the token')
    // the grant as the user allowed it; each refresh rewrites its space: permissions afresh
    const granted = record.scope ?? claims.scope
    const rewrite = (scope: string) =>
      tokenScope(scope, claims.sub, spaceTypes).catch((err) => {
        throw err instanceof SpaceTypeError ? new OAuthError(400, 'invalid_scope', err.message) : err
      })
    let scope = granted
    if (p.scope !== undefined) {
      // never broader than what was granted: a narrower set of the granted values (as granted or
      // as a token carried them), or a refusal
      const have = new Map<string, string>()
      for (const s of granted.split(' ').filter(Boolean)) {
        have.set(s, s)
        if (isSpaceScope(s)) have.set(await rewrite(s), s)
      }
      const asked = [...new Set(p.scope.split(' ').filter(Boolean))]
      const extra = asked.find((s) => !have.has(s))
      if (extra !== undefined) throw new OAuthError(400, 'invalid_scope', `Scope ${extra} was not granted`)
      if (!asked.includes('atproto')) throw new OAuthError(400, 'invalid_scope', 'The narrowed scope must keep atproto')
      scope = [...new Set(asked.map((s) => have.get(s)!))].join(' ')
    }
    const issued = await rewrite(scope)
    const account = await store.grantableAccount(db, claims.sub)
    if (!account) throw new OAuthError(400, 'invalid_grant', 'The account is not available')
    const pair = await mintOAuthPair(oauth, claims.sub, issued, jkt, account.credential_gen)
    // of concurrent uses of one refresh token, one rotates it
    const rotated = await store.rotateRefresh(db, claims.jti, pair, { did: claims.sub, jkt, scope, clientId: record.client_id ?? clientId })
    if (!rotated) throw new OAuthError(400, 'invalid_grant', 'Refresh token has been revoked or already used')
    return { ...pair, scope: issued, sub: claims.sub }
  }

  // always 200 with an empty body. Only a token this server signed ends anything (RFC 7009:
  // an invalid token still answers 200); an expired one still ends its grant. An access token ends
  // the grant it was minted with (the official client's signOut revokes its access token); the
  // grant's access tokens stop at once, as when the person revokes the app on the account page.
  r.post(
    '/oauth/revoke',
    form,
    handle(async (req, res) => {
      const token = typeof req.body?.token === 'string' ? req.body.token : undefined
      const claims = token ? await ourToken(token) : undefined
      if (claims) await endGrant(db, claims.sub, claims.jti, OAUTH_ACCESS_TTL_S)
      res.status(200).end()
    }),
  )

  async function ourToken(token: string) {
    for (const kind of ['refresh', 'access'] as const) {
      const v = await verifyOAuthToken(oauth, token, kind, { allowExpired: true })
      if (v.ok) return v.claims
    }
    return undefined
  }

  r.use(['/oauth/par', '/oauth/token', '/oauth/revoke'], (err: unknown, req: Request, res: Response, next: NextFunction) => {
    // body-parser failures
    const e = err as { status?: number; expose?: boolean }
    // revoke answers 200 with an empty body whatever it is sent, an unreadable body too (RFC 7009 §2.2)
    if (req.originalUrl.split('?')[0] === '/oauth/revoke' && e && typeof e.status === 'number' && e.expose) return res.status(200).end()
    if (e && typeof e.status === 'number' && e.expose) {
      return res.status(400).json({ error: 'invalid_request', error_description: 'Malformed request body' })
    }
    next(err)
  })

  return r

  function handle(fn: (req: Request, res: Response) => Promise<unknown>) {
    return (req: Request, res: Response, next: NextFunction) => {
      fn(req, res).catch((err) => {
        if (err instanceof OAuthError) {
          res.setHeader('Cache-Control', 'no-store')
          if (err.error === 'invalid_dpop_proof') res.setHeader('WWW-Authenticate', `DPoP error="invalid_dpop_proof"`)
          if (err.status === 503 || err.status === 429) res.setHeader('Retry-After', '5')
          return res.status(err.status).json({ error: err.error, error_description: err.description })
        }
        next(err)
      })
    }
  }
}

/** the form's fields as single strings; a repeated field is a bad request */
function params(body: unknown): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {}
  if (!body || typeof body !== 'object') return out
  for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
    if (typeof v !== 'string') throw new OAuthError(400, 'invalid_request', `Parameter ${k} must be given once`)
    out[k] = v
  }
  return out
}

function need(p: Record<string, string | undefined>, name: string): string {
  const v = p[name]
  if (!v) throw new OAuthError(400, 'invalid_request', `Missing parameter ${name}`)
  return v
}

/**
 * PAR's scope check: `atproto` present, every value a permission form this server knows (parsed
 * by @atproto/oauth-scopes), every value declared in the client's metadata (a loopback client's
 * in its client_id). Returns the scope as asked, deduplicated.
 */
function checkScope(scope: string, client: ClientMetadata): string {
  const asked = [...new Set(scope.split(' ').filter(Boolean))]
  const declared = new Set(client.scope.split(' '))
  if (!asked.includes('atproto')) throw new OAuthError(400, 'invalid_scope', 'scope must include atproto')
  for (const s of asked) {
    // an `include:` is checked by resolving its set (expandPermissionSets), a `space:` type by its declaration
    if (isSpaceScope(s)) {
      try {
        parseSpaceScope(s)
      } catch (err) {
        if (err instanceof SpaceScopeError) throw new OAuthError(400, 'invalid_scope', `Malformed scope ${s}: ${err.message}`)
        throw err
      }
    } else if (!isAtprotoOauthScope(s) && !isIncludeScope(s)) throw new OAuthError(400, 'invalid_scope', `Unsupported scope ${s}`)
    if (!declared.has(s)) throw new OAuthError(400, 'invalid_scope', `Scope ${s} is not declared by the client`)
  }
  return asked.join(' ')
}

// RFC 8252 §7.3: a loopback redirect registered without a port matches any port
function redirectAllowed(client: ClientMetadata, uri: string): boolean {
  if (client.redirect_uris.includes(uri)) return true
  let u: URL
  try {
    u = new URL(uri)
  } catch {
    return false
  }
  if (u.protocol !== 'http:' || (u.hostname !== '127.0.0.1' && u.hostname !== '[::1]')) return false
  return client.redirect_uris.some((r) => {
    const reg = new URL(r)
    if (reg.port || reg.protocol !== 'http:' || reg.hostname !== u.hostname) return false
    const noPort = new URL(u.href)
    noPort.port = ''
    return noPort.href === reg.href
  })
}

const pkceChallenge = (verifier: string) => base64url.encode(createHash('sha256').update(verifier).digest())
