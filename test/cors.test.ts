// What a browser checks before it lets a page on another origin read an answer: the CORS headers
// on every API answer (successes, errors, 501s, 429s, proxied calls, the OAuth endpoints) and on
// preflights; and none on the sign-in page, which must also refuse to be framed.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { dpopKey, loopbackClientId, par } from './oauth-helpers.js'

const ORIGIN = 'http://app.example:8080'
const EXPOSED = [
  'dpop-nonce',
  'www-authenticate',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'ratelimit-policy',
  'atproto-repo-rev',
  'atproto-content-labelers',
]

const list = (v: string | null) =>
  (v ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)

/** what a browser needs to hand a cross-origin answer to the page */
function expectReadable(headers: Headers, what: string) {
  expect(headers.get('access-control-allow-origin'), what).toBe('*')
  expect(headers.get('access-control-allow-credentials'), what).toBeNull()
  const exposed = list(headers.get('access-control-expose-headers'))
  for (const h of EXPOSED) expect(exposed, `${what}: ${h}`).toContain(h)
}

async function preflight(url: string, method: string, requested?: string) {
  const headers: Record<string, string> = { origin: ORIGIN, 'access-control-request-method': method }
  if (requested !== undefined) headers['access-control-request-headers'] = requested
  return fetch(url, { method: 'OPTIONS', headers })
}

let pds: TestPds
let limited: TestPds
let upstream: Server
let alice: { did: string; accessJwt: string }

describe('CORS', () => {
  beforeAll(async () => {
    // a stand-in AppView that answers with CORS headers of its own, which must not reach the page
    upstream = createServer((_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'access-control-allow-origin': 'https://evil.example',
        'access-control-allow-credentials': 'true',
        'access-control-expose-headers': 'x-secret',
        'atproto-repo-rev': '3kabc',
      })
      res.end(JSON.stringify({ feed: [] }))
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const port = (upstream.address() as AddressInfo).port
    pds = await startTestPds({ PDS_BSKY_APP_VIEW_URL: `http://localhost:${port}`, PDS_BSKY_APP_VIEW_DID: `did:web:localhost%3A${port}` })
    // every budget shrunk to one request, so the second call is refused
    limited = await startTestPds({ PDS_RATE_LIMITS_ENABLED: 'true', PDS_RATE_LIMIT_MULTIPLIER: '0.0001' })
    alice = await newAccount(pds.url, 'cors')
  })
  afterAll(async () => {
    await pds?.stop()
    await limited?.stop()
    upstream?.closeAllConnections()
    await new Promise((r) => upstream?.close(r))
  })

  it('on a success, an error and a 501', async () => {
    const ok = await xrpc(pds.url, 'com.atproto.server.describeServer', { headers: { origin: ORIGIN } })
    expect(ok.status).toBe(200)
    expectReadable(ok.headers, 'describeServer')

    const session = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { origin: ORIGIN, ...bearer(alice.accessJwt) } })
    expect(session.status).toBe(200)
    expectReadable(session.headers, 'getSession')

    const denied = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { origin: ORIGIN } })
    expect(denied.status).toBe(401)
    expectReadable(denied.headers, 'getSession without a token')

    const bad = await xrpc(pds.url, 'com.atproto.repo.getRecord', { params: { repo: 'nope' }, headers: { origin: ORIGIN } })
    expect(bad.status).toBe(400)
    expectReadable(bad.headers, 'getRecord with bad params')

    const missing = await xrpc(pds.url, 'com.example.nothing.here', { headers: { origin: ORIGIN } })
    expect(missing.status).toBe(501)
    expect(missing.body.error).toBe('MethodNotImplemented')
    expectReadable(missing.headers, '501')
  })

  it('on a 429 from the rate limits', async () => {
    const first = await xrpc(limited.url, 'com.atproto.server.describeServer', { headers: { origin: ORIGIN } })
    expect(first.status).toBe(200)
    const second = await xrpc(limited.url, 'com.atproto.server.describeServer', { headers: { origin: ORIGIN } })
    expect(second.status).toBe(429)
    expect(second.body.error).toBe('RateLimitExceeded')
    expectReadable(second.headers, '429')
    expect(second.headers.get('ratelimit-limit')).toBeTruthy()
  })

  it('on a proxied call, replacing the upstream CORS headers with ours', async () => {
    const res = await xrpc(pds.url, 'app.bsky.feed.getTimeline', { headers: { origin: ORIGIN, ...bearer(alice.accessJwt) } })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toEqual({ feed: [] })
    expectReadable(res.headers, 'proxied getTimeline')
    expect(res.headers.get('atproto-repo-rev')).toBe('3kabc')
    expect(list(res.headers.get('access-control-expose-headers'))).not.toContain('x-secret')
  })

  it('on the OAuth endpoints a browser client calls', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-authorization-server', '/oauth/jwks']) {
      const res = await fetch(pds.url + path, { headers: { origin: ORIGIN } })
      expect(res.status, path).toBe(200)
      expectReadable(res.headers, path)
    }
    for (const path of ['/oauth/par', '/oauth/token', '/oauth/revoke']) {
      const res = await fetch(pds.url + path, {
        method: 'POST',
        headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'client_id=nobody',
      })
      expect(res.status, path).toBeGreaterThanOrEqual(200)
      expectReadable(res.headers, `${path} (${res.status})`)
    }
  })

  it('answers preflights, allowing every header the page asks for', async () => {
    const cases: [string, string, string | undefined][] = [
      ['/xrpc/com.atproto.server.getSession', 'GET', 'authorization'],
      ['/xrpc/com.atproto.repo.createRecord', 'POST', 'authorization,content-type,dpop'],
      ['/xrpc/app.bsky.feed.getTimeline', 'GET', 'Authorization, atproto-proxy, atproto-accept-labelers, X-Custom-Thing'],
      ['/xrpc/com.atproto.repo.uploadBlob', 'POST', 'content-type, authorization, content-encoding'],
      ['/xrpc/com.example.nothing.here', 'POST', 'content-type'],
      ['/xrpc/com.atproto.server.describeServer', 'GET', undefined],
      ['/oauth/par', 'POST', 'content-type, dpop'],
      ['/oauth/token', 'POST', 'content-type,dpop'],
      ['/oauth/revoke', 'POST', 'content-type, dpop'],
      ['/oauth/jwks', 'GET', undefined],
      ['/.well-known/oauth-authorization-server', 'GET', 'x-anything'],
      ['/.well-known/oauth-protected-resource', 'GET', undefined],
    ]
    for (const [path, method, requested] of cases) {
      const what = `OPTIONS ${path} (${requested ?? 'no headers'})`
      const res = await preflight(pds.url + path, method, requested)
      expect(res.status, what).toBe(204)
      expect(res.headers.get('access-control-allow-origin'), what).toBe('*')
      expect(res.headers.get('access-control-allow-credentials'), what).toBeNull()
      const methods = list(res.headers.get('access-control-allow-methods'))
      expect(methods, what).toEqual(expect.arrayContaining(['get', 'post']))
      const allowed = list(res.headers.get('access-control-allow-headers'))
      const wanted = requested ? list(requested) : ['authorization', 'dpop', 'content-type', 'atproto-proxy', 'atproto-accept-labelers']
      for (const h of wanted) expect(allowed, `${what}: ${h}`).toContain(h)
      for (const h of EXPOSED) expect(list(res.headers.get('access-control-expose-headers')), `${what}: ${h}`).toContain(h)
      expect(Number(res.headers.get('access-control-max-age')), what).toBeGreaterThan(0)
      expect(await res.text(), what).toBe('')
    }
  })

  it('leaves the sign-in page same-origin and unframeable', async () => {
    const key = await dpopKey()
    const redirect = 'http://127.0.0.1:1/callback'
    const clientId = loopbackClientId(undefined, redirect)
    const pushed = await par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, key, {
      client_id: clientId,
      redirect_uri: redirect,
      state: 's',
    })
    expect(pushed.status, pushed.text).toBe(201)
    const pages = [
      `/oauth/authorize?${new URLSearchParams({ client_id: clientId, request_uri: pushed.json.request_uri })}`,
      // the "request expired" page
      '/oauth/authorize?request_uri=urn%3Aietf%3Aparams%3Aoauth%3Arequest_uri%3Agone',
    ]
    for (const path of pages) {
      const res = await fetch(pds.url + path, { headers: { origin: ORIGIN } })
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/)
      expect(res.headers.get('access-control-allow-origin'), path).toBeNull()
      expect(res.headers.get('x-frame-options'), path).toBe('DENY')
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'")
    }
    const pre = await preflight(`${pds.url}/oauth/authorize`, 'POST', 'content-type')
    expect(pre.headers.get('access-control-allow-origin')).toBeNull()
  })
})
