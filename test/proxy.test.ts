import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { verifyJwt } from '@atproto/xrpc-server'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, startTestPds, xrpc, type TestPds } from './harness.js'

// A stand-in AppView on loopback: serves its did:web document and verifies every service-auth
// JWT it receives against the calling user's DID document, as a real AppView does.
type Seen = { headers: IncomingMessage['headers']; claims: any; bodySha?: string; bodyLength?: number }

class StandInService {
  server!: Server
  did = ''
  url = ''
  seen: Seen[] = []
  userKeys = new Map<string, string>()

  async start() {
    this.server = createServer((req, res) => this.handle(req, res).catch((err) => this.fail(res, 500, String(err))))
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()))
    const port = (this.server.address() as AddressInfo).port
    this.did = `did:web:localhost%3A${port}`
    this.url = `http://localhost:${port}`
  }

  stop() {
    this.server.closeAllConnections()
    return new Promise((r) => this.server.close(r))
  }

  private fail(res: ServerResponse, status: number, message: string) {
    if (res.headersSent) return res.destroy()
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: status === 401 ? 'AuthenticationRequired' : 'InvalidRequest', message }))
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url!, this.url)
    if (url.pathname === '/.well-known/did.json') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end(
        JSON.stringify({
          '@context': ['https://www.w3.org/ns/did/v1'],
          id: this.did,
          service: [
            { id: '#bsky_appview', type: 'BskyAppView', serviceEndpoint: this.url },
            { id: '#bsky_chat', type: 'BskyChatService', serviceEndpoint: this.url },
          ],
        }),
      )
    }
    const lxm = url.pathname.replace('/xrpc/', '')
    const jwt = (req.headers.authorization ?? '').replace(/^Bearer /, '')
    let claims
    try {
      claims = await verifyJwt(jwt, this.did, lxm, async (iss) => {
        const key = this.userKeys.get(iss)
        if (!key) throw new Error('unknown issuer')
        return key
      })
    } catch (err) {
      return this.fail(res, 401, String(err))
    }
    const seen: Seen = { headers: req.headers, claims }
    this.seen.push(seen)
    if (req.method === 'POST') {
      const hash = createHash('sha256')
      let n = 0
      for await (const chunk of req) {
        hash.update(chunk)
        n += chunk.length
      }
      seen.bodySha = hash.digest('hex')
      seen.bodyLength = n
    }
    if (lxm === 'app.bsky.unspecced.hang') return // never answers
    if (lxm === 'app.bsky.unspecced.huge') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 50_000 })
      return res.end('x'.repeat(50_000))
    }
    if (lxm === 'app.bsky.unspecced.refuse') return this.fail(res, 400, 'no such thing')
    res.writeHead(200, {
      'content-type': 'application/json',
      'atproto-repo-rev': '3kabc',
      'set-cookie': 'tracking=1',
      'x-internal': 'secret',
    })
    res.end(JSON.stringify({ feed: [], cursor: 'next', lxm, bytes: seen.bodyLength ?? null }))
  }
}

let appview: StandInService
let pds: TestPds
let slow: TestPds
let alice: { did: string; accessJwt: string; didDoc: any }

async function account(on: TestPds, name: string) {
  const res = await xrpc(on.url, 'com.atproto.server.createAccount', {
    body: { handle: `${name}.test`, email: `${name}@example.com`, password: 'hunter2hunter2' },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  const key = res.body.didDoc.verificationMethod[0].publicKeyMultibase
  appview.userKeys.set(res.body.did, `did:key:${key}`)
  return res.body
}

describe('service proxying', () => {
  beforeAll(async () => {
    appview = new StandInService()
    await appview.start()
    pds = await startTestPds({ PDS_BSKY_APP_VIEW_URL: appview.url, PDS_BSKY_APP_VIEW_DID: appview.did })
    slow = await startTestPds({ PDS_PROXY_TIMEOUT_MS: '300', PDS_PROXY_MAX_RESPONSE_BYTES: '1000' })
    alice = await account(pds, 'alice')
  })
  afterAll(async () => {
    await pds?.stop()
    await slow?.stop()
    await appview?.stop()
  })

  it('forwards app.bsky.feed.getTimeline to the AppView with a service JWT that verifies', async () => {
    appview.seen.length = 0
    const res = await xrpc(pds.url, 'app.bsky.feed.getTimeline', { params: { limit: '10' }, headers: bearer(alice.accessJwt) })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toEqual({ feed: [], cursor: 'next', lxm: 'app.bsky.feed.getTimeline', bytes: null })
    const [seen] = appview.seen
    expect(seen.claims).toMatchObject({ iss: alice.did, aud: appview.did, lxm: 'app.bsky.feed.getTimeline' })
    const jwt = seen.headers.authorization!.slice('Bearer '.length)
    expect(decodeProtectedHeader(jwt)).toEqual({ typ: 'JWT', alg: 'ES256K' })
    const claims = decodeJwt(jwt)
    expect(claims.exp! - claims.iat!).toBe(60)
    expect(typeof claims.jti).toBe('string')
  })

  it('sends the access token nowhere and only allow-listed headers either way', async () => {
    appview.seen.length = 0
    const res = await xrpc(pds.url, 'app.bsky.feed.getTimeline', {
      headers: { ...bearer(alice.accessJwt), 'accept-language': 'fr', cookie: 'session=1', 'x-custom': 'y' },
    })
    expect(res.status).toBe(200)
    const h = appview.seen[0].headers
    expect(h['accept-language']).toBe('fr')
    expect(h.cookie).toBeUndefined()
    expect(h['x-custom']).toBeUndefined()
    expect(h.authorization).not.toContain(alice.accessJwt)
    expect(res.headers.get('atproto-repo-rev')).toBe('3kabc')
    expect(res.headers.get('set-cookie')).toBeNull()
    expect(res.headers.get('x-internal')).toBeNull()
  })

  it('follows an atproto-proxy header to the named service of a did:web document', async () => {
    appview.seen.length = 0
    const res = await xrpc(slow.url, 'chat.bsky.convo.listConvos', {
      headers: { ...bearer((await account(slow, 'carol')).accessJwt), 'atproto-proxy': `${appview.did}#bsky_chat` },
    })
    expect(res.status, res.text).toBe(200)
    expect(appview.seen[0].claims).toMatchObject({ aud: appview.did, lxm: 'chat.bsky.convo.listConvos' })
  })

  it('holds chat to a privileged app password whatever the case of its namespace', async () => {
    const created = await xrpc(pds.url, 'com.atproto.server.createAppPassword', {
      headers: bearer(alice.accessJwt),
      body: { name: 'casual' },
    })
    expect(created.status, created.text).toBe(200)
    const session = await xrpc(pds.url, 'com.atproto.server.createSession', {
      body: { identifier: 'alice.test', password: created.body.password },
    })
    const jwt = session.body.accessJwt
    appview.seen.length = 0
    for (const nsid of ['chat.bsky.convo.listConvos', 'CHAT.bsky.convo.listConvos', 'Chat.Bsky.convo.listConvos']) {
      for (const headers of [{}, { 'atproto-proxy': `${appview.did}#bsky_chat` }] as Record<string, string>[]) {
        const res = await xrpc(pds.url, nsid, { headers: { ...bearer(jwt), ...headers } })
        expect([nsid, res.status, res.body.error]).toEqual([nsid, 403, 'InsufficientScope'])
      }
    }
    expect(appview.seen).toHaveLength(0)
  })

  it('streams a procedure body through unchanged', async () => {
    appview.seen.length = 0
    const body = JSON.stringify({ items: Array.from({ length: 2000 }, (_, i) => ({ i, s: 'abcdefghij' })) })
    const res = await xrpc(pds.url, 'app.bsky.unspecced.ingest', { body, headers: bearer(alice.accessJwt) })
    expect(res.status, res.text).toBe(200)
    expect(appview.seen[0].bodyLength).toBe(Buffer.byteLength(body))
    expect(appview.seen[0].bodySha).toBe(createHash('sha256').update(body).digest('hex'))
  })

  it("passes the service's own error through", async () => {
    const res = await xrpc(pds.url, 'app.bsky.unspecced.refuse', { headers: bearer(alice.accessJwt) })
    expect(res.status).toBe(400)
    expect(res.body).toEqual({ error: 'InvalidRequest', message: 'no such thing' })
  })

  it('requires a signed-in caller', async () => {
    const res = await xrpc(pds.url, 'app.bsky.feed.getTimeline')
    expect(res.status).toBe(401)
    expect(res.body.error).toBe('AuthMissing')
    const bad = await xrpc(pds.url, 'app.bsky.feed.getTimeline', { headers: bearer('nope') })
    expect(bad.status).toBe(401)
    expect(bad.body.error).toBe('InvalidToken')
  })

  it('keeps methods without a target at 501 MethodNotImplemented', async () => {
    const res = await xrpc(pds.url, 'com.example.nothing.here', { headers: bearer(alice.accessJwt) })
    expect(res.status).toBe(501)
    expect(res.body.error).toBe('MethodNotImplemented')
    // no AppView configured: app.bsky.* is not served either
    const none = await xrpc(slow.url, 'app.bsky.feed.getTimeline', { headers: bearer(alice.accessJwt) })
    expect(none.status).toBe(501)
  })

  it('refuses malformed and unresolvable atproto-proxy headers with InvalidRequest', async () => {
    for (const value of [
      'no-fragment',
      '#svc',
      `${appview.did}#`,
      `${appview.did}#a#b`,
      'did:web:localhost%3A1#x',
      `${appview.did}#nosuch`,
    ]) {
      const res = await xrpc(pds.url, 'app.bsky.feed.getTimeline', {
        headers: { ...bearer(alice.accessJwt), 'atproto-proxy': value },
      })
      expect(res.status, value).toBe(400)
      expect(res.body.error, value).toBe('InvalidRequest')
    }
  })

  it('answers 504 UpstreamTimeout when the service does not answer in time', async () => {
    const carol = await xrpc(slow.url, 'com.atproto.server.createSession', {
      body: { identifier: 'carol.test', password: 'hunter2hunter2' },
    })
    const started = Date.now()
    const res = await xrpc(slow.url, 'app.bsky.unspecced.hang', {
      headers: { ...bearer(carol.body.accessJwt), 'atproto-proxy': `${appview.did}#bsky_appview` },
    })
    expect(res.status).toBe(504)
    expect(res.body.error).toBe('UpstreamTimeout')
    expect(Date.now() - started).toBeLessThan(5000)
  })

  it('refuses a response larger than the limit with 502 UpstreamFailure', async () => {
    const carol = await xrpc(slow.url, 'com.atproto.server.createSession', {
      body: { identifier: 'carol.test', password: 'hunter2hunter2' },
    })
    const res = await xrpc(slow.url, 'app.bsky.unspecced.huge', {
      headers: { ...bearer(carol.body.accessJwt), 'atproto-proxy': `${appview.did}#bsky_appview` },
    })
    expect(res.status).toBe(502)
    expect(res.body.error).toBe('UpstreamFailure')
  })
})
