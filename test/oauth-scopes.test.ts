// Granular OAuth permissions end to end, as an app built today uses them: the official
// @atproto/oauth-client-node signs in through the HTML form with the permissions the app declares,
// then @atproto/api's Agent works on the session. What was granted works; what was not answers
// 403 InsufficientScope naming the missing permission, and nothing is written. A loopback PLC
// directory serves the accounts' documents (to the client and the server) and one of a stand-in
// AppView, which records the service tokens proxied calls carry.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent } from '@atproto/api'
import type { NodeOAuthClient, OAuthSession } from '@atproto/oauth-client-node'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { describe, newAccount as harnessAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { officialClient, signInOfficial } from './official-client.js'
import { dpopKey, loopbackClientId, par } from './oauth-helpers.js'

// the stand-in AppView's identity: a did:plc the loopback directory answers for
const SERVICE_DID = 'did:plc:' + 'v'.repeat(24)
const APPVIEW = `${SERVICE_DID}#bsky_appview`

let pds: TestPds
let plc: Server
let plcUrl: string
let service: Server
let serviceUrl: string
const seen: { path: string; headers: IncomingHttpHeaders }[] = []

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const newClient = (scope: string) => officialClient(pds.url, plcUrl, scope)
const newAccount = () => harnessAccount(pds.url, 'granular')

/** the whole sign-in: PAR (inside authorize), the form, the callback */
async function signIn(handle: string, scope: string): Promise<{ client: NodeOAuthClient; session: OAuthSession; agent: Agent }> {
  const client = newClient(scope)
  const session = await signInOfficial(client, pds.url, handle, scope)
  return { client, session, agent: new Agent(session) }
}

const srv = () => ({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL })
const refused = (scope: string) => ({ status: 403, error: 'InsufficientScope', message: `Missing required scope "${scope}"` })
const postRecord = (text: string) => ({ $type: 'app.bsky.feed.post', text, createdAt: new Date().toISOString() })

async function postCount(did: string): Promise<number> {
  const res = await xrpc(pds.url, 'com.atproto.repo.listRecords', { params: { repo: did, collection: 'app.bsky.feed.post' } })
  return res.body.records.length
}

describe('granular OAuth permissions', () => {
  beforeAll(async () => {
    service = createServer((req, res) => {
      seen.push({ path: (req.url ?? '').split('?')[0], headers: req.headers })
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ feed: [] }))
    })
    serviceUrl = await listen(service)
    // the directory the server publishes operations to and resolves DIDs from
    plc = createServer(async (req, res) => {
      if (req.method === 'POST') {
        req.resume()
        return res.writeHead(200).end()
      }
      const did = decodeURIComponent((req.url ?? '/').slice(1))
      // documents only: the server then builds on its own log of the DID's operations
      if (did.includes('/')) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"not here"}')
      const doc =
        did === SERVICE_DID
          ? {
              '@context': ['https://www.w3.org/ns/did/v1'],
              id: SERVICE_DID,
              service: [{ id: '#bsky_appview', type: 'BskyAppView', serviceEndpoint: serviceUrl }],
            }
          : await didDocFor(pds.services.db, did)
      if (!doc) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"DID not registered"}')
      res.writeHead(200, { 'content-type': 'application/did+ld+json' }).end(JSON.stringify(doc))
    })
    plcUrl = await listen(plc)
    pds = await startTestPds({ PDS_DID_PLC_URL: plcUrl })
  })
  afterAll(async () => {
    await pds?.stop()
    service?.closeAllConnections()
    await new Promise((resolve) => service?.close(resolve))
    await new Promise((resolve) => plc?.close(resolve))
  })

  it('lets an app post but not like, upload images but not video, and read the email it asked for', async () => {
    const acct = await newAccount()
    const scope = 'atproto repo:app.bsky.feed.post?action=create blob:image/* account:email'
    const { session, agent } = await signIn(acct.handle, scope)
    expect((await session.getTokenInfo(false)).scope).toBe(scope)

    const posted = await agent.post({ text: 'granted' })
    expect(posted.uri).toContain('/app.bsky.feed.post/')
    await expect(agent.like(posted.uri, posted.cid)).rejects.toMatchObject(refused('repo:app.bsky.feed.like?action=create'))
    await expect(agent.deletePost(posted.uri)).rejects.toMatchObject(refused('repo:app.bsky.feed.post?action=delete'))
    // putRecord may create or replace: creating alone is not enough
    await expect(
      agent.com.atproto.repo.putRecord({ repo: acct.did, collection: 'app.bsky.feed.post', rkey: 'fixed', record: postRecord('put') }),
    ).rejects.toMatchObject(refused('repo:app.bsky.feed.post?action=update'))

    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3])
    const image = await agent.uploadBlob(png, { encoding: 'image/png' })
    expect(image.data.blob.mimeType).toBe('image/png')
    await expect(agent.uploadBlob(new Uint8Array([0, 0, 0, 0x20, 0x66, 0x74]), { encoding: 'video/mp4' })).rejects.toMatchObject(
      refused('blob:video/mp4'),
    )

    const me = await agent.com.atproto.server.getSession()
    expect(me.data).toMatchObject({ did: acct.did, email: acct.email, emailConfirmed: false })
    // nothing beyond what was asked: the handle, the AppView's preferences
    await expect(agent.com.atproto.identity.updateHandle({ handle: acct.handle.replace('granular', 'moved') })).rejects.toMatchObject(
      refused('identity:handle'),
    )
    await expect(agent.app.bsky.actor.getPreferences()).rejects.toMatchObject(
      refused('rpc:app.bsky.actor.getPreferences?aud=did:web:api.bsky.app%23bsky_appview'),
    )
    expect(await postCount(acct.did)).toBe(1)
  })

  it('checks every write of applyWrites before writing any', async () => {
    const acct = await newAccount()
    const { agent } = await signIn(acct.handle, 'atproto repo:app.bsky.feed.post')
    const create = (collection: string, value: Record<string, unknown>) => ({
      $type: 'com.atproto.repo.applyWrites#create' as const,
      collection,
      value,
    })
    const like = {
      $type: 'app.bsky.feed.like',
      subject: { uri: `at://${acct.did}/app.bsky.feed.post/x`, cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
      createdAt: new Date().toISOString(),
    }
    await expect(
      agent.com.atproto.repo.applyWrites({
        repo: acct.did,
        writes: [create('app.bsky.feed.post', postRecord('first')), create('app.bsky.feed.like', like)],
      }),
    ).rejects.toMatchObject(refused('repo:app.bsky.feed.like?action=create'))
    expect(await postCount(acct.did)).toBe(0)
    // every action on posts was granted (no action named): create, replace and delete all work
    await agent.com.atproto.repo.applyWrites({ repo: acct.did, writes: [create('app.bsky.feed.post', postRecord('ok'))] })
    await agent.com.atproto.repo.putRecord({ repo: acct.did, collection: 'app.bsky.feed.post', rkey: 'fixed', record: postRecord('put') })
    expect(await postCount(acct.did)).toBe(2)
    await agent.com.atproto.repo.deleteRecord({ repo: acct.did, collection: 'app.bsky.feed.post', rkey: 'fixed' })
    expect(await postCount(acct.did)).toBe(1)
  })

  it('needs both create and update for putRecord', async () => {
    const acct = await newAccount()
    const put = (agent: Agent) =>
      agent.com.atproto.repo.putRecord({ repo: acct.did, collection: 'app.bsky.feed.post', rkey: 'both', record: postRecord('put') })
    const updateOnly = await signIn(acct.handle, 'atproto repo:app.bsky.feed.post?action=update')
    await expect(put(updateOnly.agent)).rejects.toMatchObject(refused('repo:app.bsky.feed.post?action=create'))
    const both = await signIn(acct.handle, 'atproto repo:app.bsky.feed.post?action=create&action=update')
    expect((await put(both.agent)).data.uri).toContain('/app.bsky.feed.post/both')
  })

  it('shows the email only with account:email or transition:email', async () => {
    const acct = await newAccount()
    for (const [scope, shown] of [
      ['atproto repo:*', false],
      ['atproto transition:generic', false],
      ['atproto transition:email', true],
      ['atproto account:email', true],
    ] as const) {
      const { agent } = await signIn(acct.handle, scope)
      const { data } = await agent.com.atproto.server.getSession()
      expect([scope, data.did, data.email, data.emailConfirmed]).toEqual(
        shown ? [scope, acct.did, acct.email, false] : [scope, acct.did, undefined, undefined],
      )
      if (shown) expect(data.emailAuthFactor).toBe(false)
      else expect(data).not.toHaveProperty('emailAuthFactor')
    }
  })

  it('starts sign-in for the transition and repo permissions apps ask for today', async () => {
    const acct = await newAccount()
    for (const scope of [
      'atproto transition:chat.bsky',
      'atproto transition:email',
      'atproto repo:app.bsky.feed.post',
      'atproto transition:generic transition:chat.bsky transition:email',
      'atproto identity:handle account:status?action=manage',
    ]) {
      const url = await newClient(scope).authorize(acct.handle, { scope })
      expect(url.searchParams.get('request_uri'), scope).toMatch(/^urn:ietf:params:oauth:request_uri:/)
    }
  })

  it('answers invalid_scope at PAR for an undeclared or malformed scope', async () => {
    const key = await dpopKey()
    const undeclared = await par(srv(), key, { client_id: loopbackClientId('atproto repo:app.bsky.feed.post'), scope: 'atproto repo:*' })
    expect([undeclared.status, undeclared.json.error]).toEqual([400, 'invalid_scope'])
    expect(undeclared.json.error_description).toContain('repo:*')
    for (const bad of ['repo:not_an_nsid', 'blob:image', 'rpc:*?aud=*', 'account:password', 'identity:email']) {
      const scope = `atproto ${bad}`
      const res = await par(srv(), key, { client_id: loopbackClientId(scope), scope })
      expect([bad, res.status, res.json.error]).toEqual([bad, 400, 'invalid_scope'])
    }
  })

  it('keeps the granted scope across a refresh', async () => {
    const acct = await newAccount()
    const scope = 'atproto repo:app.bsky.feed.post?action=create'
    const { client, session } = await signIn(acct.handle, scope)
    const before = (await session.getTokenInfo(false)).scope
    const restored = await client.restore(acct.did, true)
    const info = await restored.getTokenInfo(false)
    expect([before, info.scope]).toEqual([scope, scope])
    const agent = new Agent(restored)
    await agent.post({ text: 'after refresh' })
    await expect(
      agent.com.atproto.repo.createRecord({ repo: acct.did, collection: 'app.bsky.feed.like', record: {} }),
    ).rejects.toMatchObject({ status: 403 })
  })

  it('proxies a call only under the rpc: permission for that method and service, with a token for the bare DID', async () => {
    const acct = await newAccount()
    const { agent } = await signIn(acct.handle, `atproto rpc:app.bsky.feed.getTimeline?aud=${APPVIEW}`)
    const viaAppView = agent.withProxy('bsky_appview', SERVICE_DID)
    seen.length = 0
    const timeline = await viaAppView.app.bsky.feed.getTimeline()
    expect(timeline.data.feed).toEqual([])
    expect(seen.map((s) => s.path)).toEqual(['/xrpc/app.bsky.feed.getTimeline'])
    const token = decodeJwt(String(seen[0].headers.authorization).replace(/^Bearer /, ''))
    expect(token).toMatchObject({ iss: acct.did, aud: SERVICE_DID, lxm: 'app.bsky.feed.getTimeline' })
    // another method, or the same one at another service, is refused before anything is sent
    await expect(viaAppView.app.bsky.feed.getAuthorFeed({ actor: acct.did })).rejects.toMatchObject(
      refused(`rpc:app.bsky.feed.getAuthorFeed?aud=${SERVICE_DID}%23bsky_appview`),
    )
    await expect(agent.withProxy('bsky_chat', SERVICE_DID).app.bsky.feed.getTimeline()).rejects.toMatchObject({
      status: 403,
      error: 'InsufficientScope',
    })
    expect(seen).toHaveLength(1)
  })

  it('mints service tokens for the methods an rpc: permission names, and chat only with transition:chat.bsky', async () => {
    const acct = await newAccount()
    const feed = await signIn(acct.handle, 'atproto rpc:app.bsky.feed.getFeedSkeleton?aud=*')
    const minted = await feed.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:feed.example', lxm: 'app.bsky.feed.getFeedSkeleton' })
    expect(decodeJwt(minted.data.token)).toMatchObject({ iss: acct.did, aud: 'did:web:feed.example', lxm: 'app.bsky.feed.getFeedSkeleton' })
    await expect(
      feed.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:feed.example', lxm: 'app.bsky.feed.getTimeline' }),
    ).rejects.toMatchObject({ status: 403, error: 'InsufficientScope', message: expect.stringContaining('app.bsky.feed.getTimeline') })
    // a token for no method in particular is never an OAuth app's to have
    await expect(feed.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:feed.example' })).rejects.toMatchObject({ status: 403 })

    const chatLxm = 'chat.bsky.convo.getLog'
    await expect(feed.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:api.bsky.chat', lxm: chatLxm })).rejects.toMatchObject({
      status: 403,
      error: 'InsufficientScope',
    })
    const generic = await signIn(acct.handle, 'atproto transition:generic')
    await expect(generic.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:api.bsky.chat', lxm: chatLxm })).rejects.toMatchObject({
      status: 403,
      error: 'InsufficientScope',
    })
    const chat = await signIn(acct.handle, 'atproto transition:chat.bsky')
    const chatToken = await chat.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:api.bsky.chat', lxm: chatLxm })
    expect(decodeJwt(chatToken.data.token)).toMatchObject({ aud: 'did:web:api.bsky.chat', lxm: chatLxm })
    // a privileged method stays out of reach whatever the permission
    await expect(
      chat.agent.com.atproto.server.getServiceAuth({ aud: 'did:web:elsewhere.example', lxm: 'com.atproto.server.createAccount' }),
    ).rejects.toMatchObject({ status: 403, error: 'InsufficientScope' })
  })

  it('keeps transition:generic reaching what it always reached, and only that', async () => {
    const acct = await newAccount()
    const { agent } = await signIn(acct.handle, 'atproto transition:generic')
    const posted = await agent.post({ text: 'generic' })
    await agent.like(posted.uri, posted.cid)
    await agent.uploadBlob(new Uint8Array([0, 0, 0, 0x20, 0x66, 0x74]), { encoding: 'video/mp4' })
    await agent.app.bsky.actor.putPreferences({ preferences: [] })
    expect((await agent.app.bsky.actor.getPreferences()).data.preferences).toEqual([])
    await agent.com.atproto.identity.updateHandle({ handle: acct.handle.replace('granular', 'generic') })
    await expect(agent.com.atproto.server.createAppPassword({ name: 'no' })).rejects.toMatchObject({
      status: 403,
      error: 'InsufficientScope',
    })
  })
})
