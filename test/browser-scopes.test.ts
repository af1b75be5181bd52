// Granular permissions as a single-page app in headless Chromium meets them, through the official
// @atproto/oauth-client-browser and our sign-in and consent pages: an app asking to create posts
// and upload images may do exactly that; an app asking for a permission set published on this
// server gets what the set grants and nothing else, with the set's title on the consent page in
// the browser's language; and a refreshed token never carries more than the user allowed. What
// the app sees is read by script.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { BrowserRig, hasChromium, signInThroughPages, startBrowserPlc, waitFor } from './browser-helpers.js'
import { describe, PASSWORD, startTestPds, type TestPds } from './harness.js'
import { startNameserver, type Nameserver } from './tripwire.js'

const d = hasChromium ? describe : describe.skip

const GRANULAR = 'atproto repo:app.bsky.feed.post?action=create blob:image/*'
const SET = 'com.example.home.basic'
const SET_TITLE = 'Home notes'
const POST = 'app.bsky.feed.post'
const LIKE = 'app.bsky.feed.like'
// a 1x1 PNG
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

// the app: signs in with the scope it is configured with, then offers its calls to the test
const APP = `
import { BrowserOAuthClient } from '@atproto/oauth-client-browser'
const cfg = window.CONFIG
// each token endpoint answer as script saw it
window.tokenCalls = []
const watching = async (input, init) => {
  const res = await fetch(input, init)
  const url = input instanceof Request ? input.url : String(input)
  if (url.endsWith('/oauth/token')) window.tokenCalls.push(res.status)
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
  window.signIn = (handle) => client.signIn(handle, { scope: cfg.scope }).catch((err) => { window.signInError = String(err) })
  const result = await client.init()
  if (!result) return { state: 'signed-out' }
  const { session } = result
  const call = async (path, init) => {
    const res = await session.fetchHandler(path, init)
    const text = await res.text()
    let body
    try { body = JSON.parse(text) } catch { body = text }
    return { status: res.status, body }
  }
  window.app = {
    tokenScope: async (refresh) => (await session.getTokenInfo(refresh)).scope,
    create: (collection, record) =>
      call('/xrpc/com.atproto.repo.createRecord', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ repo: session.did, collection, record: { $type: collection, createdAt: new Date().toISOString(), ...record } }),
      }),
    upload: (mimeType, base64) =>
      call('/xrpc/com.atproto.repo.uploadBlob', {
        method: 'POST',
        headers: { 'content-type': mimeType },
        body: Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)),
      }),
  }
  return { state: 'signed-in', did: session.did }
}
window.result = main().catch((err) => ({ state: 'error', message: String(err && err.stack || err) }))
`

let pds: TestPds
let plc: Awaited<ReturnType<typeof startBrowserPlc>>
let dns: Nameserver
let bundle: string
const txt: Record<string, string[]> = {}
const rig = new BrowserRig()
let n = 0

async function account(prefix: string) {
  const handle = `${prefix}${++n}.test`
  const res = await fetch(`${pds.url}/xrpc/com.atproto.server.createAccount`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle, email: `${handle}@example.com`, password: PASSWORD }),
  })
  const body = (await res.json()) as any
  expect(res.status, JSON.stringify(body)).toBe(200)
  return { handle, did: body.did as string, accessJwt: body.accessJwt as string }
}

type Call = { status: number; body: any }
type App = {
  did: string
  page: import('playwright-core').Page
  create(collection: string, record?: Record<string, unknown>): Promise<Call>
  upload(mimeType: string, base64: string): Promise<Call>
  tokenScope(refresh: boolean): Promise<string>
  tokenCalls(): Promise<number[]>
  close(): Promise<void>
}

/** an app on its own origin asking `scope`, signed in as `handle` through our pages (by a browser asking for `lang`) */
async function signedInApp(
  scope: string,
  handle: string,
  beforeAccept?: Parameters<typeof signInThroughPages>[1]['beforeAccept'],
  lang?: string,
): Promise<App> {
  const served = await rig.serveApp(bundle, (origin) => ({
    pds: pds.env.PDS_PUBLIC_URL,
    plc: plc.url,
    scope,
    clientId: `http://localhost?${new URLSearchParams({ redirect_uri: `${origin}/`, scope })}`,
  }))
  const page = await rig.browser.newPage()
  if (lang) await page.setExtraHTTPHeaders({ 'accept-language': lang })
  await page.goto(served.origin + '/', { timeout: 10_000 })
  expect(await waitFor<any>(page, 'window.result', 20_000)).toEqual({ state: 'signed-out' })
  await signInThroughPages(page, { pds, appOrigin: served.origin, handle, password: PASSWORD, beforeAccept })
  const result = await waitFor<any>(page, 'window.result', 30_000)
  expect(result.state, result.message).toBe('signed-in')
  return {
    did: result.did,
    page,
    create: (collection, record = {}) => page.evaluate(([c, r]) => (globalThis as any).app.create(c, r), [collection, record] as const),
    upload: (mimeType, base64) => page.evaluate(([m, b]) => (globalThis as any).app.upload(m, b), [mimeType, base64] as const),
    tokenScope: (refresh) => page.evaluate((r) => (globalThis as any).app.tokenScope(r), refresh),
    tokenCalls: () => page.evaluate(() => (globalThis as any).tokenCalls),
    close: () => page.close(),
  }
}

const refused = (scope: string) => ({
  status: 403,
  body: { error: 'InsufficientScope', message: `Missing required scope "${scope}"` },
})

d('granular permissions through @atproto/oauth-client-browser in headless Chromium', () => {
  beforeAll(async () => {
    // the _lexicon TXT record naming who publishes the permission set, answered on loopback
    dns = await startNameserver({}, txt)
    pds = await startTestPds({ PDS_DNS_NAMESERVERS: dns.address })
    plc = await startBrowserPlc(() => pds)
    await rig.start()
    bundle = await rig.bundle('scoped-app', APP)
  }, 60_000)
  afterAll(async () => {
    await rig.stop()
    await plc?.close()
    await pds?.stop()
    await dns?.close()
  })

  it('an app granted post creation and image uploads posts and uploads an image, and is refused a like and a video', async () => {
    const user = await account('granular')
    const app = await signedInApp(GRANULAR, user.handle)
    try {
      expect(app.did).toBe(user.did)
      expect(await app.tokenScope(false)).toBe(GRANULAR)

      const post = await app.create(POST, { text: 'posted with a granular grant' })
      expect(post.status, JSON.stringify(post.body)).toBe(200)
      expect(post.body.uri).toMatch(new RegExp(`^at://${user.did}/app\\.bsky\\.feed\\.post/`))
      const like = await app.create(LIKE, { subject: { uri: post.body.uri, cid: post.body.cid } })
      expect(like).toEqual(refused(`repo:${LIKE}?action=create`))

      const image = await app.upload('image/png', PNG)
      expect(image.status, JSON.stringify(image.body)).toBe(200)
      expect(image.body.blob).toMatchObject({ mimeType: 'image/png', size: Buffer.from(PNG, 'base64').length })
      expect(await app.upload('video/mp4', Buffer.from('not really a video').toString('base64'))).toEqual(refused('blob:video/mp4'))

      // the post is in the repository, the like is not
      const list = async (collection: string) => {
        const res = await fetch(`${pds.url}/xrpc/com.atproto.repo.listRecords?repo=${user.did}&collection=${collection}`)
        return ((await res.json()) as any).records.map((r: any) => r.uri)
      }
      expect(await list(POST)).toEqual([post.body.uri])
      expect(await list(LIKE)).toEqual([])
    } finally {
      await app.close()
    }
  }, 90_000)

  it('an app asking for a permission set published on this server writes what the set grants and nothing else', async () => {
    // the set's publisher is an account here; its domain's _lexicon record names it
    const publisher = await account('publisher')
    const published = await fetch(`${pds.url}/xrpc/com.atproto.repo.createRecord`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${publisher.accessJwt}` },
      body: JSON.stringify({
        repo: publisher.did,
        collection: 'com.atproto.lexicon.schema',
        rkey: SET,
        record: {
          $type: 'com.atproto.lexicon.schema',
          lexicon: 1,
          id: SET,
          defs: {
            main: {
              type: 'permission-set',
              title: SET_TITLE,
              'title:lang': { fr: 'Notes de la maison' },
              detail: 'Write and delete your notes',
              permissions: [
                { type: 'permission', resource: 'repo', collection: ['com.example.home.note'] },
                // outside the set's namespace, and a kind a set may not grant: neither is granted
                { type: 'permission', resource: 'repo', collection: [POST] },
                { type: 'permission', resource: 'blob', accept: ['image/*'] },
              ],
            },
          },
        },
      }),
    })
    expect(published.status, await published.clone().text()).toBe(200)
    txt['_lexicon.home.example.com'] = [`did=${publisher.did}`]

    const user = await account('setuser')
    const consent: { title?: string | null; detail?: string | null } = {}
    // a French browser: the set's French title, and its only detail
    const app = await signedInApp(
      `atproto include:${SET}`,
      user.handle,
      async (page) => {
        const set = page.locator(`#permissions li[data-kind="set"][data-nsid="${SET}"]`)
        consent.title = await set.locator('strong').textContent()
        consent.detail = await set.locator('p').textContent()
      },
      'fr-FR,fr;q=0.9,en;q=0.5',
    )
    try {
      expect(consent).toEqual({ title: 'Notes de la maison', detail: 'Write and delete your notes' })
      // the token lists what the set expands to, never the include: itself
      expect(await app.tokenScope(false)).toBe('atproto repo:com.example.home.note')

      const note = await app.create('com.example.home.note', { text: 'a note' })
      expect(note.status, JSON.stringify(note.body)).toBe(200)
      expect(await app.create(POST, { text: 'not granted' })).toEqual(refused(`repo:${POST}?action=create`))
      expect(await app.upload('image/png', PNG)).toEqual(refused('blob:image/png'))
    } finally {
      await app.close()
    }
  }, 90_000)

  it('a refresh forced by the app keeps exactly the granted scope, and the refreshed token is refused the same', async () => {
    const user = await account('refresh')
    const app = await signedInApp(GRANULAR, user.handle)
    try {
      const granted = await app.tokenScope(false)
      expect(granted).toBe(GRANULAR)
      expect(await app.tokenCalls()).toEqual([200])
      // the client asks the token endpoint for a new token now, expired or not
      const refreshed = await app.tokenScope(true)
      expect(await app.tokenCalls()).toEqual([200, 200])
      expect(refreshed).toBe(granted)
      // the new token works as far as the grant goes, and no further
      const post = await app.create(POST, { text: 'after the refresh' })
      expect(post.status, JSON.stringify(post.body)).toBe(200)
      expect(await app.create(LIKE, { subject: { uri: post.body.uri, cid: post.body.cid } })).toEqual(refused(`repo:${LIKE}?action=create`))
      expect(await app.upload('video/mp4', 'AAAA')).toEqual(refused('blob:video/mp4'))
    } finally {
      await app.close()
    }
  }, 90_000)
})
