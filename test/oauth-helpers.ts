// Test-side OAuth client pieces: a DPoP key, proofs, PKCE, and the raw authorization-code flow
// through PAR, the sign-in form and the token endpoint.
import { createHash, randomBytes } from 'node:crypto'
import { base64url, calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose'
import { expect } from 'vitest'

export const REDIRECT = 'http://127.0.0.1:9/callback'
export const SCOPE = 'atproto transition:generic'
export const loopbackClientId = (scope = SCOPE, redirect = REDIRECT) =>
  `http://localhost?${new URLSearchParams({ redirect_uri: redirect, scope })}`

/**
 * `proof` carries the server's current DPoP nonce unless `extra` names a `nonce` (undefined
 * leaves it out)
 */
export type DpopKey = { jwk: JWK; jkt: string; proof(htm: string, htu: string, extra?: Record<string, unknown>): Promise<string> }

export async function dpopKey(): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
  const jwk = await exportJWK(publicKey)
  const jkt = await calculateJwkThumbprint(jwk, 'sha256')
  return {
    jwk,
    jkt,
    proof: async (htm, htu, extra = {}) =>
      new SignJWT({
        htm,
        htu,
        jti: randomBytes(12).toString('hex'),
        iat: Math.floor(Date.now() / 1000),
        ...('nonce' in extra ? {} : { nonce: await serverNonce(htu) }),
        ...extra,
      })
        .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk })
        .sign(privateKey),
  }
}

const NONCE_KEPT_MS = 30_000
const nonces = new Map<string, { nonce: string; at: number }>()
/** public origins no server listens on (a test's PDS_PUBLIC_URL), and the server to ask instead */
const nonceSources = new Map<string, string>()

/** proofs for `publicUrl` take their nonce from the server at `serverUrl` */
export function nonceFrom(publicUrl: string, serverUrl: string) {
  nonceSources.set(new URL(publicUrl).origin, new URL(serverUrl).origin)
}

/**
 * The DPoP-Nonce the server at `url`'s origin hands out, as a client learns it: from a PAR
 * answer (any request gets one), kept briefly since nonces rotate
 */
export async function serverNonce(url: string): Promise<string | undefined> {
  const origin = new URL(url).origin
  const kept = nonces.get(origin)
  if (kept && Date.now() - kept.at < NONCE_KEPT_MS && Date.now() >= kept.at) return kept.nonce
  // a proof made for a host that is no server at all (a test of htu) carries none
  const res = await fetch(`${nonceSources.get(origin) ?? origin}/oauth/par`, { method: 'POST' }).catch(() => undefined)
  if (!res) return undefined
  await res.body?.cancel()
  const nonce = res.headers.get('dpop-nonce')
  if (!nonce) throw new Error(`no DPoP-Nonce from ${origin}/oauth/par (status ${res.status})`)
  nonces.set(origin, { nonce, at: Date.now() })
  return nonce
}

export const ath = (token: string) => base64url.encode(createHash('sha256').update(token).digest())

export function pkce() {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: base64url.encode(createHash('sha256').update(verifier).digest()) }
}

export const form = (o: Record<string, string | undefined>) =>
  new URLSearchParams(Object.entries(o).filter(([, v]) => v !== undefined) as [string, string][]).toString()

export async function post(url: string, body: Record<string, string | undefined>, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: form(body),
    redirect: 'manual',
  })
  const text = await res.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, json, text, headers: res.headers }
}

/** PAR with a DPoP proof; returns request_uri */
export async function par(
  pds: { url: string; publicUrl: string },
  key: DpopKey,
  overrides: Record<string, string | undefined> = {},
  p = pkce(),
) {
  const res = await post(
    `${pds.url}/oauth/par`,
    {
      client_id: loopbackClientId(),
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: SCOPE,
      state: 'st-' + randomBytes(4).toString('hex'),
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      ...overrides,
    },
    { dpop: await key.proof('POST', `${pds.publicUrl}/oauth/par`) },
  )
  return res
}

/** GET the sign-in page: cookie and CSRF field */
export async function openPage(url: string, requestUri: string) {
  const res = await fetch(`${url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`)
  const html = await res.text()
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0]
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1]
  return { status: res.status, html, cookie, csrf }
}

export async function submitPage(
  url: string,
  requestUri: string,
  fields: { handle?: string; password?: string; action?: string; csrf_token?: string; step?: string; did?: string; remember?: string },
  cookie: string,
) {
  return post(`${url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`, fields, { cookie })
}

/** the password form, then Allow on the consent page it leads to; the consent page's answer */
export async function signInAndAllow(
  url: string,
  requestUri: string,
  login: { handle: string; password: string },
  page: { csrf?: string; cookie: string },
  extra: { remember?: string } = {},
) {
  const signedIn = await submitPage(
    url,
    requestUri,
    { ...login, ...extra, step: 'login', action: 'allow', csrf_token: page.csrf },
    page.cookie,
  )
  if (signedIn.status !== 200 || !signedIn.text.includes('name="step" value="consent"')) return signedIn
  const did = /name="did" value="([^"]+)"/.exec(signedIn.text)![1]
  return submitPage(url, requestUri, { step: 'consent', did, action: 'allow', csrf_token: page.csrf }, page.cookie)
}

/** the whole flow up to the code; returns code, state and pkce verifier */
export async function authorize(
  pds: { url: string; publicUrl: string },
  key: DpopKey,
  login: { handle: string; password: string },
  overrides: Record<string, string | undefined> = {},
) {
  const p = pkce()
  const parRes = await par(pds, key, overrides, p)
  expect(parRes.status, parRes.text).toBe(201)
  const requestUri = parRes.json.request_uri as string
  const page = await openPage(pds.url, requestUri)
  expect(page.status).toBe(200)
  const res = await signInAndAllow(pds.url, requestUri, login, page)
  expect(res.status, res.text).toBe(302)
  const loc = new URL(res.headers.get('location')!)
  return {
    code: loc.searchParams.get('code')!,
    state: loc.searchParams.get('state'),
    iss: loc.searchParams.get('iss'),
    location: loc,
    verifier: p.verifier,
  }
}

export async function exchange(
  pds: { url: string; publicUrl: string },
  key: DpopKey,
  code: string,
  verifier: string,
  overrides: Record<string, string | undefined> = {},
) {
  return post(
    `${pds.url}/oauth/token`,
    {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: loopbackClientId(),
      ...overrides,
    },
    { dpop: await key.proof('POST', `${pds.publicUrl}/oauth/token`) },
  )
}

export async function refreshGrant(
  pds: { url: string; publicUrl: string },
  key: DpopKey,
  refreshToken: string,
  extra: Record<string, string> = {},
) {
  return post(
    `${pds.url}/oauth/token`,
    { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: loopbackClientId(), ...extra },
    { dpop: await key.proof('POST', `${pds.publicUrl}/oauth/token`) },
  )
}

/** an XRPC GET with a DPoP-bound access token */
export async function dpopGet(
  pds: { url: string; publicUrl: string },
  key: DpopKey,
  accessToken: string,
  nsid: string,
  params: Record<string, string> = {},
  proofOverride?: string,
) {
  const qs = Object.keys(params).length ? '?' + new URLSearchParams(params) : ''
  const proof = proofOverride ?? (await key.proof('GET', `${pds.publicUrl}/xrpc/${nsid}`, { ath: ath(accessToken) }))
  const res = await fetch(`${pds.url}/xrpc/${nsid}${qs}`, { headers: { authorization: `DPoP ${accessToken}`, dpop: proof } })
  const text = await res.text()
  return { status: res.status, json: text ? JSON.parse(text) : undefined }
}
