// Web apps on another origin, in headless Chromium (playwright-core): a page bundling @atproto/api
// creates an account, signs in, posts, uploads an image and reads its timeline through the proxy;
// a single-page app using @atproto/oauth-client-browser signs in through the sign-in page and
// posts with DPoP-bound tokens. Without CORS the browser hands none of the answers to the page.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { BrowserRig, hasChromium, signInThroughPages, startBrowserPlc, waitFor } from './browser-helpers.js'
import { describe, startTestPds, PASSWORD, type TestPds } from './harness.js'

const d = hasChromium ? describe : describe.skip
const SCOPE = 'atproto transition:generic'
// a 1x1 PNG
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

// the page bundling @atproto/api: everything a user does in a first session
const AGENT_APP = `
import { AtpAgent } from '@atproto/api'
window.run = async ({ service, handle, password, png }) => {
  const signup = new AtpAgent({ service })
  await signup.createAccount({ handle, email: handle + '@example.com', password })
  const agent = new AtpAgent({ service })
  await agent.login({ identifier: handle, password })
  const first = await agent.post({ text: 'hello from a web app', createdAt: new Date().toISOString() })
  const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0))
  const upload = await agent.uploadBlob(bytes, { encoding: 'image/png' })
  const blob = upload.data.blob
  const second = await agent.post({
    text: 'and a picture',
    embed: { $type: 'app.bsky.embed.images', images: [{ image: blob, alt: 'a dot' }] },
    createdAt: new Date().toISOString(),
  })
  const timeline = await agent.getTimeline({ limit: 10 })
  const image = timeline.data.feed.find((f) => f.post.embed)?.post.embed.images[0]
  const shown = image ? await fetch(image.fullsize) : undefined
  return {
    did: agent.session.did,
    posts: [first.uri, second.uri],
    blob: { ref: blob.ref.toString(), mimeType: blob.mimeType, size: blob.size },
    feed: timeline.data.feed.map((f) => ({ uri: f.post.uri, text: f.post.record.text, by: f.post.author.handle })),
    imageBytes: shown ? (await shown.arrayBuffer()).byteLength : -1,
  }
}
`

// the single-page app: signs in with the official browser OAuth client, then posts
const OAUTH_APP = `
import { BrowserOAuthClient } from '@atproto/oauth-client-browser'
const cfg = window.CONFIG
// what script can read of each answer from the PDS
window.seen = []
const watching = async (input, init) => {
  const res = await fetch(input, init)
  const url = input instanceof Request ? input.url : String(input)
  if (url.startsWith(cfg.pds)) {
    window.seen.push({ url, status: res.status, dpopNonce: res.headers.get('dpop-nonce'), wwwAuthenticate: res.headers.get('www-authenticate') })
  }
  return res
}
const main = async () => {
  const client = await BrowserOAuthClient.load({
    clientId: cfg.clientId,
    handleResolver: cfg.pds,
    plcDirectoryUrl: cfg.plc,
    allowHttp: true,
    responseMode: 'query',
    fetch: watching,
  })
  window.signIn = (handle) => client.signIn(handle, { scope: cfg.scope }).catch((err) => { window.signInError = String(err) + (err.cause ? ' (cause: ' + String(err.cause) + ')' : '') })
  const result = await client.init()
  if (!result) return { state: 'signed-out' }
  const { session } = result
  const info = await session.getTokenInfo(false)
  const write = await session.fetchHandler('/xrpc/com.atproto.repo.createRecord', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      repo: session.did,
      collection: 'app.bsky.feed.post',
      record: { $type: 'app.bsky.feed.post', text: 'posted from a single-page app', createdAt: new Date().toISOString() },
    }),
  })
  const me = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
  // a token the server does not know: the challenge must be readable by script
  const refused = await watching(cfg.pds + '/xrpc/com.atproto.server.getSession', { headers: { authorization: 'DPoP not-a-token', dpop: 'not-a-proof' } })
  return {
    state: 'signed-in',
    did: session.did,
    scope: info.scope,
    write: { status: write.status, body: await write.json() },
    me: await me.json(),
    refused: { status: refused.status, wwwAuthenticate: refused.headers.get('www-authenticate') },
  }
}
window.result = main().catch((err) => ({ state: 'error', message: String(err && err.stack || err) }))
`

/**
 * A stand-in AppView: getTimeline answers the caller's own posts (read from the PDS), with image
 * embeds pointing at the PDS's getBlob, after checking the service token names it and the method.
 */
class StandInAppView {
  server!: Server
  did = ''
  url = ''
  calls: { iss: string; lxm: string }[] = []
  constructor(private pdsUrl: () => string) {}

  async start() {
    this.server = createServer((req, res) =>
      this.handle(req, res).catch((err) => this.reply(res, 500, { error: 'InternalServerError', message: String(err) })),
    )
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r))
    const port = (this.server.address() as AddressInfo).port
    this.did = `did:web:localhost%3A${port}`
    this.url = `http://localhost:${port}`
  }

  private reply(res: ServerResponse, status: number, body: unknown) {
    // its own CORS headers, as a public AppView sends: the PDS must not pass them on
    res.writeHead(status, { 'content-type': 'application/json', 'access-control-allow-origin': 'https://appview.example' })
    res.end(JSON.stringify(body))
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url!, this.url)
    const lxm = url.pathname.replace('/xrpc/', '')
    const claims = decodeJwt((req.headers.authorization ?? '').replace(/^Bearer /, ''))
    if (claims.aud !== this.did || claims.lxm !== lxm)
      return this.reply(res, 401, { error: 'AuthenticationRequired', message: 'bad service token' })
    this.calls.push({ iss: String(claims.iss), lxm })
    if (lxm !== 'app.bsky.feed.getTimeline') return this.reply(res, 501, { error: 'MethodNotImplemented', message: lxm })
    const did = String(claims.iss)
    const pds = this.pdsUrl()
    const repo: any = await (await fetch(`${pds}/xrpc/com.atproto.repo.describeRepo?repo=${did}`)).json()
    const list: any = await (await fetch(`${pds}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=app.bsky.feed.post`)).json()
    const feed = list.records.map((r: any) => {
      const images = r.value.embed?.images as any[] | undefined
      const blobUrl = (i: any) => `${pds}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${i.image.ref.$link}`
      return {
        post: {
          uri: r.uri,
          cid: r.cid,
          author: { did, handle: repo.handle },
          record: r.value,
          indexedAt: new Date().toISOString(),
          ...(images && {
            embed: {
              $type: 'app.bsky.embed.images#view',
              images: images.map((i) => ({ thumb: blobUrl(i), fullsize: blobUrl(i), alt: i.alt })),
            },
          }),
        },
      }
    })
    this.reply(res, 200, { feed })
  }
}

let pds: TestPds
let appview: StandInAppView
let plc: Awaited<ReturnType<typeof startBrowserPlc>>
const rig = new BrowserRig()

d('web apps on another origin in headless Chromium', () => {
  beforeAll(async () => {
    appview = new StandInAppView(() => pds.url)
    await appview.start()
    pds = await startTestPds({ PDS_BSKY_APP_VIEW_URL: appview.url, PDS_BSKY_APP_VIEW_DID: appview.did })
    plc = await startBrowserPlc(() => pds)
    await rig.start()
  }, 60_000)
  afterAll(async () => {
    await rig.stop()
    await plc?.close()
    appview?.server?.closeAllConnections()
    await new Promise((r) => appview?.server?.close(r))
    await pds?.stop()
  })

  it('a page bundling @atproto/api signs up, posts, uploads an image and reads its timeline', async () => {
    const app = await rig.serveApp(await rig.bundle('agent-app', AGENT_APP), () => ({}))
    const page = await rig.browser.newPage()
    try {
      await page.goto(app.origin + '/', { timeout: 10_000 })
      await page.waitForFunction('typeof window.run === "function"', undefined, { timeout: 10_000 })
      const out: any = await Promise.race([
        page.evaluate((args) => (globalThis as any).run(args), {
          service: pds.url,
          handle: 'webapp.test',
          password: PASSWORD,
          png: PNG.toString('base64'),
        }),
        new Promise((_, reject) => setTimeout(() => reject(new Error('the page did not finish in 30 s')), 30_000)),
      ])
      expect(out.did).toMatch(/^did:plc:/)
      expect(out.posts).toHaveLength(2)
      for (const uri of out.posts) expect(uri).toMatch(new RegExp(`^at://${out.did}/app\\.bsky\\.feed\\.post/`))
      expect(out.blob).toMatchObject({ mimeType: 'image/png', size: PNG.length })
      expect(out.blob.ref).toMatch(/^bafkrei/)
      // the timeline came from the AppView through this server, and shows both posts and the image
      expect(out.feed.map((f: any) => f.uri).sort()).toEqual([...out.posts].sort())
      expect(out.feed.map((f: any) => f.text).sort()).toEqual(['and a picture', 'hello from a web app'])
      expect(out.feed.every((f: any) => f.by === 'webapp.test')).toBe(true)
      expect(out.imageBytes).toBe(PNG.length)
      expect(appview.calls).toContainEqual({ iss: out.did, lxm: 'app.bsky.feed.getTimeline' })
    } finally {
      await page.close()
    }
  }, 60_000)

  it('a single-page app with @atproto/oauth-client-browser signs in through the sign-in page and posts', async () => {
    const created = await fetch(`${pds.url}/xrpc/com.atproto.server.createAccount`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ handle: 'spa.test', email: 'spa@example.com', password: PASSWORD }),
    })
    expect(created.status).toBe(200)
    const did = ((await created.json()) as any).did
    const code = await rig.bundle('oauth-app', OAUTH_APP)
    const app = await rig.serveApp(code, (origin) => ({
      pds: pds.env.PDS_PUBLIC_URL,
      plc: plc.url,
      scope: SCOPE,
      clientId: `http://localhost?${new URLSearchParams({ redirect_uri: `${origin}/`, scope: SCOPE })}`,
    }))
    const page = await rig.browser.newPage()
    // every answer from the PDS as the network saw it, whatever the page was allowed to read
    const network: { url: string; status: number; dpopNonce?: string; wwwAuthenticate?: string }[] = []
    const writes: Record<string, string>[] = []
    page.on('request', (r) => {
      if (r.url().endsWith('/xrpc/com.atproto.repo.createRecord') && r.method() === 'POST') writes.push(r.headers())
    })
    page.on('response', (r) => {
      if (!r.url().startsWith(pds.env.PDS_PUBLIC_URL) || r.request().method() === 'OPTIONS') return
      const h = r.headers()
      network.push({ url: r.url(), status: r.status(), dpopNonce: h['dpop-nonce'], wwwAuthenticate: h['www-authenticate'] })
    })
    try {
      await page.goto(app.origin + '/', { timeout: 10_000 })
      expect(await waitFor<any>(page, 'window.result', 20_000)).toEqual({ state: 'signed-out' })
      // the app sends the browser to the sign-in page, and the user signs in and allows
      await signInThroughPages(page, { pds, appOrigin: app.origin, handle: 'spa.test', password: PASSWORD })
      const result = await waitFor<any>(page, 'window.result', 30_000)
      expect(result.state, result.message).toBe('signed-in')
      expect(result.did).toBe(did)
      expect(result.scope).toBe(SCOPE)
      expect(result.write.status).toBe(200)
      expect(result.write.body.uri).toMatch(new RegExp(`^at://${did}/app\\.bsky\\.feed\\.post/`))
      expect(result.me).toMatchObject({ did, handle: 'spa.test' })
      expect(result.refused.status).toBe(401)
      expect(result.refused.wwwAuthenticate).toMatch(/^DPoP /)

      // the record is in the repository, written with a DPoP-bound token and a proof
      expect(writes.length).toBeGreaterThan(0)
      for (const h of writes) {
        expect(h.authorization).toMatch(/^DPoP /)
        expect(h.dpop).toBeTruthy()
      }
      const rkey = result.write.body.uri.split('/').pop()
      const read = await fetch(`${pds.url}/xrpc/com.atproto.repo.getRecord?repo=${did}&collection=app.bsky.feed.post&rkey=${rkey}`)
      expect(((await read.json()) as any).value.text).toBe('posted from a single-page app')

      // whatever nonce or challenge the server sent (as the network saw it), script could read
      const seen: any[] = await page.evaluate(() => (globalThis as any).seen)
      const tokenCall = seen.find((s) => s.url.endsWith('/oauth/token'))
      expect(tokenCall?.status).toBe(200)
      for (const n of network) {
        if (!n.dpopNonce && !n.wwwAuthenticate) continue
        const match = seen.find((s) => s.url === n.url && s.status === n.status)
        if (!match) continue // a navigation or a call made outside the client's fetch
        if (n.dpopNonce) expect(match.dpopNonce, n.url).toBe(n.dpopNonce)
        if (n.wwwAuthenticate) expect(match.wwwAuthenticate, n.url).toBe(n.wwwAuthenticate)
      }
      expect(seen.some((s) => s.wwwAuthenticate)).toBe(true)
    } finally {
      await page.close()
    }
  }, 60_000)
})
