// OAuth for the bench: a DPoP key, proofs, and the authorization-code flow through PAR, our
// sign-in and consent forms and the token endpoint (the same steps as test/oauth-helpers.ts). A
// server whose sign-in page is not that HTML form (the reference's is a JavaScript app) is n/a.
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import { request } from 'undici'

const b64u = (buf) => Buffer.from(buf).toString('base64url')
export const REDIRECT = 'http://127.0.0.1:9/callback'
export const SCOPE = 'atproto transition:generic'
const clientId = (scope = SCOPE) => `http://localhost?${new URLSearchParams({ redirect_uri: REDIRECT, scope })}`

export class OAuthUnavailable extends Error {}

/**
 * an ES256 DPoP key; proof() signs with node:crypto directly (cheap on the client side) and
 * carries the server's DPoP nonce once one was learned (`nonce`, set from a DPoP-Nonce answer)
 */
export function dpopKey() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const { kty, crv, x, y } = publicKey.export({ format: 'jwk' })
  const jwk = { kty, crv, x, y }
  const header = b64u(JSON.stringify({ typ: 'dpop+jwt', alg: 'ES256', jwk }))
  return {
    jwk,
    nonce: undefined,
    proof(htm, htu, extra = {}) {
      const claims = { htm, htu, jti: randomBytes(12).toString('hex'), iat: Math.floor(Date.now() / 1000), ...extra }
      if (this.nonce) claims.nonce = this.nonce
      const payload = b64u(JSON.stringify(claims))
      const input = `${header}.${payload}`
      const sig = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' })
      return `${input}.${b64u(sig)}`
    },
  }
}

export const ath = (token) => b64u(createHash('sha256').update(token).digest())

/**
 * a form POST with a DPoP proof for `htu`: a server that demands its nonce (`use_dpop_nonce`, as
 * the atproto profile requires) is answered once more with the nonce it gave
 */
async function postDpop(url, fields, key, htu) {
  let res = await post(url, fields, { dpop: key.proof('POST', htu) })
  const nonce = res.headers['dpop-nonce']
  if (typeof nonce === 'string') key.nonce = nonce
  if (res.status === 400 && res.json?.error === 'use_dpop_nonce' && typeof nonce === 'string') {
    res = await post(url, fields, { dpop: key.proof('POST', htu) })
  }
  return res
}

async function post(url, fields, headers = {}) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  })
  const text = await res.body.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: res.statusCode, headers: res.headers, text, json }
}

/**
 * The whole flow for one account, for `scope`: returns { accessToken, key, publicUrl }.
 * `publicUrl` is the server's public base (htu of every proof).
 */
export async function oauthSession(url, publicUrl, { handle, password }, scope = SCOPE) {
  const key = dpopKey()
  const verifier = randomBytes(32).toString('base64url')
  const challenge = b64u(createHash('sha256').update(verifier).digest())
  const parRes = await postDpop(
    `${url}/oauth/par`,
    {
      client_id: clientId(scope),
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope,
      state: 'bench',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    },
    key,
    `${publicUrl}/oauth/par`,
  )
  if (parRes.status !== 201 || !parRes.json?.request_uri) throw new OAuthUnavailable(`PAR answered ${parRes.status}`)
  const requestUri = parRes.json.request_uri
  const page = await request(`${url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`)
  const html = await page.body.text()
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
  const setCookie = page.headers['set-cookie']
  const cookie = String(Array.isArray(setCookie) ? setCookie[0] : (setCookie ?? '')).split(';')[0]
  if (page.statusCode !== 200 || !csrf) throw new OAuthUnavailable('the sign-in page is not an HTML form this client can submit')
  const authorizeUrl = `${url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`
  // two steps: the password, then the consent page naming the account it signed in
  let submitted = await post(authorizeUrl, { handle, password, step: 'login', action: 'allow', csrf_token: csrf }, { cookie })
  const did = submitted.status === 200 && /name="did" value="([^"]+)"/.exec(submitted.text)?.[1]
  if (did) submitted = await post(authorizeUrl, { step: 'consent', did, action: 'allow', csrf_token: csrf }, { cookie })
  if (submitted.status !== 302) throw new Error(`sign-in form answered ${submitted.status}: ${submitted.text.slice(0, 200)}`)
  const code = new URL(submitted.headers.location).searchParams.get('code')
  const token = await postDpop(
    `${url}/oauth/token`,
    { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT, client_id: clientId(scope) },
    key,
    `${publicUrl}/oauth/token`,
  )
  if (token.status !== 200) throw new Error(`token endpoint answered ${token.status}: ${token.text.slice(0, 200)}`)
  return { accessToken: token.json.access_token, key, publicUrl }
}
