import { randomBytes } from 'node:crypto'
import { Secp256k1Keypair } from '@atproto/crypto'
import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, SignJWT } from 'jose'
import { k256PublicJwk, signEs256k } from '../src/jwt/es256k.js'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, xrpc, newAccount as createAccount, PASSWORD, type TestPds } from './harness.js'
import {
  ath,
  authorize,
  dpopGet,
  dpopKey,
  exchange,
  loopbackClientId,
  openPage,
  par,
  pkce,
  post,
  REDIRECT,
  refreshGrant,
  signInAndAllow,
  serverNonce,
  submitPage,
  type DpopKey,
} from './oauth-helpers.js'

let pds: TestPds
let srv: { url: string; publicUrl: string }

const newAccount = () => createAccount(pds.url, 'oauth')

/** a signed-in OAuth client: tokens bound to `key` */
async function signIn(scope?: string) {
  const acct = await newAccount()
  const key = await dpopKey()
  const overrides = scope ? { scope, client_id: loopbackClientId(scope) } : {}
  const { code, verifier } = await authorize(srv, key, { handle: acct.handle, password: PASSWORD }, overrides)
  const res = await exchange(srv, key, code, verifier, scope ? { client_id: loopbackClientId(scope) } : {})
  expect(res.status, res.text).toBe(200)
  return { acct, key, tokens: res.json as { access_token: string; refresh_token: string; scope: string; sub: string } }
}

describe('OAuth authorization server', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    srv = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  })
  afterAll(() => pds?.stop())

  describe('discovery', () => {
    it('publishes authorization-server metadata for the atproto profile', async () => {
      const res = await fetch(`${pds.url}/.well-known/oauth-authorization-server`)
      expect(res.status).toBe(200)
      const m: any = await res.json()
      const base = srv.publicUrl
      expect(m).toMatchObject({
        issuer: base,
        authorization_endpoint: `${base}/oauth/authorize`,
        token_endpoint: `${base}/oauth/token`,
        pushed_authorization_request_endpoint: `${base}/oauth/par`,
        require_pushed_authorization_requests: true,
        revocation_endpoint: `${base}/oauth/revoke`,
        response_types_supported: ['code'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['none'],
        dpop_signing_alg_values_supported: ['ES256K', 'ES256'],
        authorization_response_iss_parameter_supported: true,
        client_id_metadata_document_supported: true,
      })
      // the static values; the permission forms (repo:, rpc:, blob:, account:, identity:) are not enumerable
      expect([...m.scopes_supported].sort()).toEqual(['atproto', 'transition:chat.bsky', 'transition:email', 'transition:generic'])
    })

    it('publishes protected-resource metadata naming itself as the authorization server', async () => {
      const m: any = await (await fetch(`${pds.url}/.well-known/oauth-protected-resource`)).json()
      expect(m.resource).toBe(srv.publicUrl)
      expect(m.authorization_servers).toEqual([srv.publicUrl])
      expect([...m.scopes_supported].sort()).toEqual(['atproto', 'transition:chat.bsky', 'transition:email', 'transition:generic'])
    })

    it('serves exactly one secp256k1 key whose kid is its RFC 7638 thumbprint', async () => {
      const { keys } = (await (await fetch(`${pds.url}/oauth/jwks`)).json()) as any
      expect(keys).toHaveLength(1)
      const [k] = keys
      expect(k).toMatchObject({ kty: 'EC', crv: 'secp256k1', alg: 'ES256K', use: 'sig' })
      expect(k.d).toBeUndefined()
      expect(k.kid).toBe(await calculateJwkThumbprint({ kty: k.kty, crv: k.crv, x: k.x, y: k.y }, 'sha256'))
    })
  })

  describe('PAR', () => {
    it('returns a request_uri valid for 60 seconds, pinning the DPoP proof key', async () => {
      const key = await dpopKey()
      const res = await par(srv, key)
      expect(res.status).toBe(201)
      expect(res.json.request_uri).toMatch(/^urn:ietf:params:oauth:request_uri:/)
      expect(res.json.expires_in).toBe(60)
      const row = await pds.services.db
        .selectFrom('oauth_request')
        .selectAll()
        .where('request_uri', '=', res.json.request_uri)
        .executeTakeFirstOrThrow()
      expect(row.dpop_jkt).toBe(key.jkt)
    })

    it('accepts dpop_jkt as a parameter without a proof, and refuses a mismatch or neither', async () => {
      const key = await dpopKey()
      const other = await dpopKey()
      const p = pkce()
      const body = {
        client_id: loopbackClientId(),
        response_type: 'code',
        redirect_uri: REDIRECT,
        scope: 'atproto',
        state: 's',
        code_challenge: p.challenge,
        code_challenge_method: 'S256',
      }
      expect((await post(`${pds.url}/oauth/par`, { ...body, dpop_jkt: key.jkt })).status).toBe(201)
      const neither = await post(`${pds.url}/oauth/par`, body)
      expect(neither.status).toBe(400)
      expect(neither.json.error).toBe('invalid_request')
      const mismatch = await par(srv, key, { dpop_jkt: other.jkt })
      expect(mismatch.status).toBe(400)
      expect(mismatch.json.error).toBe('invalid_request')
    })

    it.each([
      ['response_type', { response_type: 'token' }, 'unsupported_response_type'],
      ['code_challenge_method', { code_challenge_method: 'plain' }, 'invalid_request'],
      ['code_challenge', { code_challenge: 'short' }, 'invalid_request'],
      ['missing state', { state: undefined }, 'invalid_request'],
      ['missing scope', { scope: undefined }, 'invalid_request'],
      ['scope without atproto', { scope: 'transition:generic' }, 'invalid_scope'],
      ['unknown scope', { scope: 'atproto email' }, 'invalid_scope'],
      ['unregistered redirect_uri', { redirect_uri: 'http://127.0.0.1:9/elsewhere' }, 'invalid_request'],
      ['non-loopback redirect', { redirect_uri: 'https://evil.example/cb' }, 'invalid_request'],
      ['bad client_id', { client_id: 'not a url' }, 'invalid_client'],
      ['private-address client', { client_id: 'https://10.0.0.1/client.json' }, 'invalid_client'],
      ['response_mode fragment', { response_mode: 'fragment' }, 'invalid_request'],
    ])('refuses a bad parameter: %s', async (_name, overrides, error) => {
      const res = await par(srv, await dpopKey(), overrides)
      expect(res.status).toBe(400)
      expect(res.json.error).toBe(error)
      expect(typeof res.json.error_description).toBe('string')
    })

    it('refuses a scope the loopback client did not declare', async () => {
      const res = await par(srv, await dpopKey(), { client_id: loopbackClientId('atproto'), scope: 'atproto transition:generic' })
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_scope')
    })

    it('refuses a bad DPoP proof on PAR', async () => {
      const key = await dpopKey()
      const p = pkce()
      const body = {
        client_id: loopbackClientId(),
        response_type: 'code',
        redirect_uri: REDIRECT,
        scope: 'atproto',
        state: 's',
        code_challenge: p.challenge,
        code_challenge_method: 'S256',
      }
      const res = await post(`${pds.url}/oauth/par`, body, { dpop: await key.proof('POST', `${srv.publicUrl}/oauth/token`) })
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_dpop_proof')
    })
  })

  describe('sign-in page', () => {
    it('renders a password form with the login hint and a device cookie, then the scopes in words', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const res = await par(srv, key, { login_hint: acct.handle })
      const page = await openPage(pds.url, res.json.request_uri)
      expect(page.status).toBe(200)
      expect(page.cookie).toMatch(/^pds_device=.+/)
      // the form token is derived from the device secret, never the secret itself
      expect(page.csrf).toBeTruthy()
      expect(page.cookie).not.toContain(page.csrf!)
      expect(page.html).toContain(`value="${acct.handle}"`)
      expect(page.html).toContain('name="password"')
      expect(page.html).toContain('value="allow"')
      expect(page.html).toContain('value="deny"')
      // no inline script: the one script is the server's passkey file
      expect(page.html.match(/<script[^>]*>/g)).toEqual(['<script src="/web/passkey.js" defer>'])
      const consent = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: acct.handle, password: PASSWORD, step: 'login', csrf_token: page.csrf },
        page.cookie,
      )
      expect(consent.status).toBe(200)
      expect(consent.text).toContain('Know who you are')
      expect(consent.text).toContain('Create, change and delete any of your records')
      expect(consent.text).toContain('atproto transition:generic')
      expect(consent.text).not.toContain('<script')
    })

    it('redirects with code, state and iss, and deletes the PAR record', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const r = await authorize(srv, key, { handle: acct.handle, password: PASSWORD }, { state: 'my-state' })
      expect(r.location.origin + r.location.pathname).toBe(REDIRECT)
      expect(r.code).toBeTruthy()
      expect(r.state).toBe('my-state')
      expect(r.iss).toBe(srv.publicUrl)
      expect(await pds.services.db.selectFrom('oauth_request').selectAll().where('state', '=', 'my-state').execute()).toEqual([])
    })

    it('re-renders the page with a message on a wrong password, without saying whether the handle exists', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const res = await par(srv, key)
      const page = await openPage(pds.url, res.json.request_uri)
      const wrong = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: acct.handle, password: 'nope', action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      const unknown = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: 'nobody.test', password: 'nope', action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      expect(wrong.status).toBe(401)
      expect(wrong.text).toContain('Wrong handle or password.')
      expect(unknown.text).toContain('Wrong handle or password.')
      expect(wrong.text).toContain(`value="${acct.handle}"`)
      // the request is still pending: the right password now works
      const ok = await signInAndAllow(pds.url, res.json.request_uri, { handle: acct.handle, password: PASSWORD }, page)
      expect(ok.status).toBe(302)
    })

    it('refuses an app password (main password only)', async () => {
      const acct = await newAccount()
      // no app-password method on this branch: the page only ever compares the main password hash
      const res = await par(srv, await dpopKey())
      const page = await openPage(pds.url, res.json.request_uri)
      const r = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: acct.handle, password: 'abcd-efgh-ijkl-mnop', action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      expect(r.status).toBe(401)
    })

    it('refuses a post without the CSRF cookie or with another token', async () => {
      const acct = await newAccount()
      const res = await par(srv, await dpopKey())
      const page = await openPage(pds.url, res.json.request_uri)
      const login = { handle: acct.handle, password: PASSWORD, action: 'allow' }
      expect((await submitPage(pds.url, res.json.request_uri, { ...login, csrf_token: page.csrf }, '')).status).toBe(403)
      expect((await submitPage(pds.url, res.json.request_uri, { ...login, csrf_token: 'forged' }, page.cookie)).status).toBe(403)
    })

    it('Deny redirects with error=access_denied', async () => {
      const res = await par(srv, await dpopKey(), { state: 'deny-state' })
      const page = await openPage(pds.url, res.json.request_uri)
      const r = await submitPage(pds.url, res.json.request_uri, { action: 'deny', csrf_token: page.csrf }, page.cookie)
      expect(r.status).toBe(302)
      const loc = new URL(r.headers.get('location')!)
      expect(loc.searchParams.get('error')).toBe('access_denied')
      expect(loc.searchParams.get('state')).toBe('deny-state')
      expect(loc.searchParams.get('iss')).toBe(srv.publicUrl)
      expect(loc.searchParams.get('code')).toBeNull()
    })

    it('answers an unknown or used request_uri with an expired page', async () => {
      const page = await openPage(pds.url, 'urn:ietf:params:oauth:request_uri:nope')
      expect(page.status).toBe(400)
      expect(page.html).toContain('expired')
    })
  })

  describe('token endpoint', () => {
    it('exchanges a code for ES256K tokens bound to the DPoP key (cnf.jkt)', async () => {
      const { acct, key, tokens } = await signIn()
      expect(tokens).toMatchObject({ token_type: 'DPoP', expires_in: 1800, scope: 'atproto transition:generic', sub: acct.did })
      const h = decodeProtectedHeader(tokens.access_token)
      expect(h).toMatchObject({ alg: 'ES256K', typ: 'at+jwt', kid: pds.services.oauth.key.kid })
      const c = decodeJwt(tokens.access_token)
      expect(c).toMatchObject({
        iss: srv.publicUrl,
        aud: 'did:web:localhost',
        sub: acct.did,
        scope: 'atproto transition:generic',
        cnf: { jkt: key.jkt },
      })
      expect(c.exp! - c.iat!).toBe(1800)
      expect(typeof c.jti).toBe('string')
      expect(c.token_kind).toBeUndefined()
      expect(decodeProtectedHeader(tokens.refresh_token).typ).toBe('refresh+jwt')
      const r = decodeJwt(tokens.refresh_token)
      expect(r.token_kind).toBe('refresh')
      expect(r.exp! - r.iat!).toBe(60 * 24 * 3600)
      const rec = await pds.services.db.selectFrom('refresh_token').selectAll().where('jti', '=', r.jti!).executeTakeFirstOrThrow()
      expect(rec).toMatchObject({ kind: 'oauth', dpop_jkt: key.jkt, scope: 'atproto transition:generic', did: acct.did })
    })

    it('refuses a PKCE mismatch and burns the code', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const { code, verifier } = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const bad = await exchange(srv, key, code, pkce().verifier)
      expect(bad.status).toBe(400)
      expect(bad.json.error).toBe('invalid_grant')
      const again = await exchange(srv, key, code, verifier)
      expect(again.json.error).toBe('invalid_grant')
    })

    it('accepts a code once only', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const { code, verifier } = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const results = await Promise.all([exchange(srv, key, code, verifier), exchange(srv, key, code, verifier)])
      expect(results.map((r) => r.status).sort()).toEqual([200, 400])
      const third = await exchange(srv, key, code, verifier)
      expect(third.json.error).toBe('invalid_grant')
    })

    it('refuses a redirect_uri or client_id other than the authorization request', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const a = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const r1 = await exchange(srv, key, a.code, a.verifier, { redirect_uri: 'http://127.0.0.1:9/other' })
      expect(r1.json.error).toBe('invalid_grant')
      const b = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const r2 = await exchange(srv, key, b.code, b.verifier, { client_id: loopbackClientId('atproto') })
      expect(r2.json.error).toBe('invalid_grant')
    })

    it('refuses a code exchanged with a DPoP key other than the one pinned at PAR', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const a = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const res = await exchange(srv, await dpopKey(), a.code, a.verifier)
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_grant')
      // the rightful holder still can
      expect((await exchange(srv, key, a.code, a.verifier)).status).toBe(200)
    })

    it('refuses a token request without a DPoP proof', async () => {
      const res = await post(`${pds.url}/oauth/token`, {
        grant_type: 'authorization_code',
        code: 'x',
        code_verifier: 'y',
        redirect_uri: REDIRECT,
        client_id: loopbackClientId(),
      })
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_dpop_proof')
    })

    it('rotates a refresh token once, bound to the same key, and refuses its reuse', async () => {
      const { key, tokens } = await signIn()
      const r1 = await refreshGrant(srv, key, tokens.refresh_token)
      expect(r1.status, r1.text).toBe(200)
      expect(r1.json.refresh_token).not.toBe(tokens.refresh_token)
      expect(decodeJwt(r1.json.access_token).cnf).toEqual({ jkt: key.jkt })
      const reuse = await refreshGrant(srv, key, tokens.refresh_token)
      expect(reuse.status).toBe(400)
      expect(reuse.json.error).toBe('invalid_grant')
      expect((await dpopGet(srv, key, r1.json.access_token, 'com.atproto.server.getSession')).status).toBe(200)
    })

    it('lets exactly one of two concurrent refreshes win', async () => {
      const { key, tokens } = await signIn()
      const rs = await Promise.all([refreshGrant(srv, key, tokens.refresh_token), refreshGrant(srv, key, tokens.refresh_token)])
      expect(rs.map((r) => r.status).sort()).toEqual([200, 400])
    })

    it('refuses a refresh with another DPoP key', async () => {
      const { tokens } = await signIn()
      const res = await refreshGrant(srv, await dpopKey(), tokens.refresh_token)
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_grant')
    })

    it('narrows the scope on refresh and never broadens it', async () => {
      const { key, tokens } = await signIn()
      const narrow = await refreshGrant(srv, key, tokens.refresh_token, { scope: 'atproto' })
      expect(narrow.status).toBe(200)
      expect(narrow.json.scope).toBe('atproto')
      // asking for more than was granted is refused (RFC 6749 §6) and leaves the refresh token usable
      const broaden = await refreshGrant(srv, key, narrow.json.refresh_token, { scope: 'atproto transition:generic' })
      expect([broaden.status, broaden.json.error]).toEqual([400, 'invalid_scope'])
      const again = await refreshGrant(srv, key, narrow.json.refresh_token)
      expect(again.status).toBe(200)
      expect(again.json.scope).toBe('atproto')
      expect(decodeJwt(again.json.access_token).scope).toBe('atproto')
    })

    it('refuses an access token presented as a refresh token', async () => {
      const { key, tokens } = await signIn()
      const res = await refreshGrant(srv, key, tokens.access_token)
      expect(res.json.error).toBe('invalid_grant')
    })

    it('revokes a refresh token; revoke always answers 200 with an empty body', async () => {
      const { key, tokens } = await signIn()
      const res = await post(`${pds.url}/oauth/revoke`, { token: tokens.refresh_token, token_type_hint: 'refresh_token' })
      expect(res.status).toBe(200)
      expect(res.text).toBe('')
      expect((await refreshGrant(srv, key, tokens.refresh_token)).json.error).toBe('invalid_grant')
      for (const body of [
        { token: tokens.refresh_token },
        { token: 'garbage' },
        {},
        { token: tokens.access_token, token_type_hint: 'access_token' },
      ]) {
        const r = await post(`${pds.url}/oauth/revoke`, body)
        expect(r.status).toBe(200)
        expect(r.text).toBe('')
      }
    })

    it('revoke answers 200 with an empty body even when the form body cannot be read', async () => {
      for (const contentType of ['application/x-www-form-urlencoded; charset=bogus-charset', 'application/x-www-form-urlencoded']) {
        const body = contentType.includes('bogus') ? 'token=x' : `token=${'x'.repeat(200_000)}`
        const res = await fetch(`${pds.url}/oauth/revoke`, { method: 'POST', headers: { 'content-type': contentType }, body })
        expect(res.status).toBe(200)
        expect(await res.text()).toBe('')
      }
    })

    it('revoke ignores a token this server did not sign, even one naming a live grant', async () => {
      const { key, tokens } = await signIn()
      const claims = decodeJwt(tokens.refresh_token)
      const b64u = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')
      const unsigned = `${b64u({ alg: 'none', typ: 'refresh+jwt' })}.${b64u(claims)}.`
      const stranger = await Secp256k1Keypair.create()
      const foreign = await signEs256k(stranger, { typ: 'refresh+jwt' }, claims)
      const accessClaims = decodeJwt(tokens.access_token)
      const foreignAccess = await signEs256k(stranger, { typ: 'at+jwt' }, accessClaims)
      for (const token of [unsigned, foreign, foreignAccess]) {
        const res = await post(`${pds.url}/oauth/revoke`, { token })
        expect([res.status, res.text]).toEqual([200, ''])
      }
      // the grant is intact: its refresh token still rotates
      const refreshed = await refreshGrant(srv, key, tokens.refresh_token)
      expect(refreshed.status, refreshed.text).toBe(200)
    })

    it('revoking the access token ends its grant (what the official client does on sign-out)', async () => {
      const { key, tokens } = await signIn()
      expect((await post(`${pds.url}/oauth/revoke`, { token: tokens.access_token, token_type_hint: 'access_token' })).status).toBe(200)
      expect((await refreshGrant(srv, key, tokens.refresh_token)).json.error).toBe('invalid_grant')
    })
  })

  describe('lifetimes and account state', () => {
    it('an expired PAR request can no longer be signed in to', async () => {
      const acct = await newAccount()
      const res = await par(srv, await dpopKey())
      const page = await openPage(pds.url, res.json.request_uri)
      await pds.services.db
        .updateTable('oauth_request')
        .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('request_uri', '=', res.json.request_uri)
        .execute()
      const r = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: acct.handle, password: PASSWORD, action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      expect(r.status).toBe(400)
      expect(r.text).toContain('expired')
    })

    it('an expired authorization code is refused', async () => {
      const acct = await newAccount()
      const key = await dpopKey()
      const a = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      await pds.services.db
        .updateTable('oauth_code')
        .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('code', '=', a.code)
        .execute()
      const res = await exchange(srv, key, a.code, a.verifier)
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_grant')
    })

    it('a taken-down account cannot sign in on the page nor refresh', async () => {
      const { acct, key, tokens } = await signIn()
      await pds.services.db.updateTable('account').set({ status: 'takendown' }).where('did', '=', acct.did).execute()
      expect((await refreshGrant(srv, key, tokens.refresh_token)).json.error).toBe('invalid_grant')
      const res = await par(srv, await dpopKey())
      const page = await openPage(pds.url, res.json.request_uri)
      const r = await submitPage(
        pds.url,
        res.json.request_uri,
        { handle: acct.handle, password: PASSWORD, action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      expect(r.status).toBe(401)
      expect(r.text).toContain('taken down')
    })

    it('refuses an unknown grant_type', async () => {
      const key = await dpopKey()
      const res = await post(
        `${pds.url}/oauth/token`,
        { grant_type: 'password' },
        { dpop: await key.proof('POST', `${srv.publicUrl}/oauth/token`) },
      )
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('unsupported_grant_type')
    })
  })

  describe('DPoP proof algorithms', () => {
    it('accepts an ES256K proof (the profile mandates it) end to end', async () => {
      const kp = await Secp256k1Keypair.create()
      const jwk = k256PublicJwk(kp)
      const jkt = await calculateJwkThumbprint(jwk, 'sha256')
      const key = {
        jwk,
        jkt,
        proof: async (htm: string, htu: string, extra: Record<string, unknown> = {}) =>
          signEs256k(
            kp,
            { typ: 'dpop+jwt', jwk },
            { htm, htu, iat: Math.floor(Date.now() / 1000), jti: randomBytes(8).toString('hex'), nonce: await serverNonce(htu), ...extra },
          ),
      }
      const acct = await newAccount()
      const a = await authorize(srv, key, { handle: acct.handle, password: PASSWORD })
      const tokens = await exchange(srv, key, a.code, a.verifier)
      expect(tokens.status, tokens.text).toBe(200)
      expect(decodeJwt(tokens.json.access_token).cnf).toEqual({ jkt })
      expect((await dpopGet(srv, key, tokens.json.access_token, 'com.atproto.server.getSession')).status).toBe(200)
    })

    it('refuses proofs with another typ, a symmetric alg or a private key in the header', async () => {
      const key = await dpopKey()
      const htu = `${srv.publicUrl}/oauth/token`
      const now = Math.floor(Date.now() / 1000)
      const claims = { htm: 'POST', htu, iat: now, jti: 'x' + Math.random() }
      const badTyp = await new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new Uint8Array(32))
      const hs = await new SignJWT({ ...claims })
        .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: key.jwk })
        .sign(new Uint8Array(32))
      for (const proof of [badTyp, hs, 'not-a-jwt']) {
        const res = await post(
          `${pds.url}/oauth/token`,
          { grant_type: 'refresh_token', refresh_token: 'x', client_id: loopbackClientId() },
          { dpop: proof },
        )
        expect(res.status).toBe(400)
        expect(res.json.error).toBe('invalid_dpop_proof')
      }
    })
  })

  describe('DPoP on XRPC calls', () => {
    it('getSession works with a DPoP access token', async () => {
      const { acct, key, tokens } = await signIn()
      const res = await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession')
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject({ did: acct.did, handle: acct.handle })
    })

    it('refuses a replayed proof', async () => {
      const { key, tokens } = await signIn()
      const proof = await key.proof('GET', `${srv.publicUrl}/xrpc/com.atproto.server.getSession`, { ath: ath(tokens.access_token) })
      expect((await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)).status).toBe(200)
      const again = await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)
      expect(again.status).toBe(401)
      expect(again.json.error).toBe('InvalidToken')
    })

    it('refuses a jti already accepted within 60 s even when another key signs it', async () => {
      const a = await signIn()
      const b = await signIn()
      const url = `${srv.publicUrl}/xrpc/com.atproto.server.getSession`
      const jti = randomBytes(12).toString('hex')
      const first = await dpopGet(
        srv,
        a.key,
        a.tokens.access_token,
        'com.atproto.server.getSession',
        {},
        await a.key.proof('GET', url, { ath: ath(a.tokens.access_token), jti }),
      )
      expect(first.status).toBe(200)
      const second = await dpopGet(
        srv,
        b.key,
        b.tokens.access_token,
        'com.atproto.server.getSession',
        {},
        await b.key.proof('GET', url, { ath: ath(b.tokens.access_token), jti }),
      )
      expect([second.status, second.json.error]).toEqual([401, 'InvalidToken'])
    })

    it.each([
      ['htm', (k: DpopKey, t: string, u: string) => k.proof('POST', u, { ath: ath(t) })],
      ['htu', (k: DpopKey, t: string, u: string) => k.proof('GET', u.replace('getSession', 'getServiceAuth'), { ath: ath(t) })],
      ['htu host', (k: DpopKey, t: string, u: string) => k.proof('GET', u.replace('localhost', 'evil.example'), { ath: ath(t) })],
      ['stale iat', (k: DpopKey, t: string, u: string) => k.proof('GET', u, { ath: ath(t), iat: Math.floor(Date.now() / 1000) - 120 })],
      ['future iat', (k: DpopKey, t: string, u: string) => k.proof('GET', u, { ath: ath(t), iat: Math.floor(Date.now() / 1000) + 120 })],
      ['ath', (k: DpopKey, _t: string, u: string) => k.proof('GET', u, { ath: ath('another token') })],
    ])('refuses a proof with the wrong %s', async (_name, make) => {
      const { key, tokens } = await signIn()
      const url = `${srv.publicUrl}/xrpc/com.atproto.server.getSession`
      const res = await dpopGet(
        srv,
        key,
        tokens.access_token,
        'com.atproto.server.getSession',
        {},
        await make(key, tokens.access_token, url),
      )
      expect(res.status).toBe(401)
      expect(res.json.error).toBe('InvalidToken')
    })

    it('refuses a proof without ath beside an access token', async () => {
      const { key, tokens } = await signIn()
      const url = `${srv.publicUrl}/xrpc/com.atproto.server.getSession`
      const res = await fetch(`${pds.url}/xrpc/com.atproto.server.getSession`, {
        headers: { authorization: `DPoP ${tokens.access_token}`, dpop: await key.proof('GET', url) },
      })
      expect(res.status).toBe(401)
      expect(((await res.json()) as any).error).toBe('InvalidToken')
    })

    it('records no proof that is not bound to a verified code or token, so strangers cannot fill the replay store', async () => {
      const store = pds.services.oauth.replay as unknown as { size: number }
      const before = store.size
      for (let i = 0; i < 20; i++) {
        const stranger = await dpopKey()
        const res = await post(
          `${pds.url}/oauth/token`,
          {
            grant_type: 'authorization_code',
            code: `forged-${i}`,
            code_verifier: 'v'.repeat(43),
            redirect_uri: REDIRECT,
            client_id: loopbackClientId(),
          },
          { dpop: await stranger.proof('POST', `${srv.publicUrl}/oauth/token`) },
        )
        expect(res.json.error).toBe('invalid_grant')
        expect((await par(srv, stranger)).status).toBe(201)
      }
      expect(store.size).toBe(before)
      // a signed-in client's proofs are recorded (and refused on replay) as before
      const { key, tokens } = await signIn()
      const proof = await key.proof('GET', `${srv.publicUrl}/xrpc/com.atproto.server.getSession`, { ath: ath(tokens.access_token) })
      expect((await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)).status).toBe(200)
      expect((await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)).status).toBe(401)
    })

    it('ignores the query string of the request when matching htu', async () => {
      const { key, tokens } = await signIn()
      const res = await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getServiceAuth', {
        aud: 'did:web:feed.example',
        lxm: 'app.bsky.feed.getTimeline',
      })
      expect(res.status).toBe(200)
    })

    it('refuses a proof signed by a key other than cnf.jkt', async () => {
      const { tokens } = await signIn()
      const other = await dpopKey()
      const res = await dpopGet(srv, other, tokens.access_token, 'com.atproto.server.getSession')
      expect(res.status).toBe(401)
      expect(res.json.error).toBe('InvalidToken')
    })

    it('answers AuthMissing when the DPoP header is missing', async () => {
      const { tokens } = await signIn()
      const res = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `DPoP ${tokens.access_token}` } })
      expect(res.status).toBe(401)
      expect(res.body.error).toBe('AuthMissing')
    })

    it('refuses an OAuth token sent as Bearer, and a refresh token as access token', async () => {
      const { key, tokens } = await signIn()
      const bearer = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `Bearer ${tokens.access_token}` } })
      expect(bearer.status).toBe(401)
      const asAccess = await dpopGet(srv, key, tokens.refresh_token, 'com.atproto.server.getSession')
      expect(asAccess.status).toBe(401)
      expect(asAccess.json.error).toBe('InvalidToken')
    })

    it('refreshSession and deleteSession refuse the DPoP scheme', async () => {
      const { key, tokens } = await signIn()
      for (const nsid of ['com.atproto.server.refreshSession', 'com.atproto.server.deleteSession']) {
        const res = await fetch(`${pds.url}/xrpc/${nsid}`, {
          method: 'POST',
          headers: { authorization: `DPoP ${tokens.refresh_token}`, dpop: await key.proof('POST', `${srv.publicUrl}/xrpc/${nsid}`) },
        })
        expect(res.status).toBe(401)
        expect(((await res.json()) as any).error).toBe('InvalidToken')
      }
    })

    it('applies the status gate to OAuth callers', async () => {
      const { acct, key, tokens } = await signIn()
      await pds.services.db.updateTable('account').set({ status: 'deactivated' }).where('did', '=', acct.did).execute()
      const res = await dpopGet(srv, key, tokens.access_token, 'com.atproto.server.getSession')
      expect(res.status).toBe(403)
      expect(res.json.error).toBe('AccountDeactivated')
    })

    it('checks the registry scope over HTTP: atproto-only tokens get InsufficientScope on transition:generic methods', async () => {
      const narrow = await signIn('atproto')
      const wide = await signIn()
      const call = async (s: typeof narrow, nsid: string, body?: unknown) => {
        const method = body === undefined ? 'GET' : 'POST'
        const proof = await s.key.proof(method, `${srv.publicUrl}/xrpc/${nsid}`, { ath: ath(s.tokens.access_token) })
        return xrpc(pds.url, nsid, {
          method,
          body,
          headers: { authorization: `DPoP ${s.tokens.access_token}`, dpop: proof },
        })
      }
      const record = (s: typeof narrow) => ({
        repo: s.acct.did,
        collection: 'app.bsky.feed.post',
        record: { $type: 'app.bsky.feed.post', text: 'scoped', createdAt: new Date().toISOString() },
      })
      const refused = await call(narrow, 'com.atproto.repo.createRecord', record(narrow))
      expect([refused.status, refused.body.error]).toEqual([403, 'InsufficientScope'])
      const apw = await call(narrow, 'com.atproto.server.createAppPassword', { name: 'scoped-app' })
      expect([apw.status, apw.body.error]).toEqual([403, 'InsufficientScope'])
      const written = await call(wide, 'com.atproto.repo.createRecord', record(wide))
      expect(written.status).toBe(200)
      // transition:generic is a superset of atproto; atproto is enough for atproto methods
      expect((await call(wide, 'com.atproto.server.getSession')).status).toBe(200)
      expect((await call(narrow, 'com.atproto.server.getSession')).status).toBe(200)
      // session Bearer callers are fully privileged
      const acct = await newAccount()
      const bearer = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        body: record({ acct } as typeof narrow),
        headers: { authorization: `Bearer ${acct.accessJwt}` },
      })
      expect(bearer.status).toBe(200)
    })
  })
})
