// End to end with the official @atproto/oauth-client-node: a loopback client with its own DPoP
// keys resolves the handle through this server, the DID through a loopback PLC directory that
// serves the documents this server renders from its own log, signs in through the HTML form,
// exchanges the code, calls XRPC through the session's fetchHandler, refreshes and revokes.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { NodeOAuthClient, type NodeSavedSession, type NodeSavedState } from '@atproto/oauth-client-node'
import { requestLocalLock } from '@atproto/oauth-client'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { signEs256k } from '../src/jwt/es256k.js'
import { describe, startTestPds, xrpc, PASSWORD, type TestPds } from './harness.js'
import { openPage, post, signInAndAllow } from './oauth-helpers.js'

let pds: TestPds
let plc: Server
let plcUrl: string
const REDIRECT = 'http://127.0.0.1:9/oauth-callback'
const SCOPE = 'atproto transition:generic'

function mapStore<T>() {
  const m = new Map<string, T>()
  return {
    m,
    store: {
      get: async (k: string) => m.get(k),
      set: async (k: string, v: T) => void m.set(k, v),
      del: async (k: string) => void m.delete(k),
    },
  }
}

function newClient(sessions = mapStore<NodeSavedSession>()) {
  const states = mapStore<NodeSavedState>()
  const client = new NodeOAuthClient({
    clientMetadata: {
      client_id: `http://localhost?${new URLSearchParams({ redirect_uri: REDIRECT, scope: SCOPE })}`,
      redirect_uris: [REDIRECT],
      scope: SCOPE,
      response_types: ['code'],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      dpop_bound_access_tokens: true,
    },
    stateStore: states.store,
    sessionStore: sessions.store,
    handleResolver: pds.url,
    plcDirectoryUrl: plcUrl,
    allowHttp: true,
    requestLock: requestLocalLock,
  })
  return { client, sessions }
}

/** what a browser does with the authorization URL: sign in through the form */
async function signInThroughForm(authUrl: URL, handle: string) {
  const requestUri = authUrl.searchParams.get('request_uri')!
  expect(authUrl.searchParams.get('client_id')).toMatch(/^http:\/\/localhost\?/)
  const page = await openPage(pds.url, requestUri)
  expect(page.status).toBe(200)
  expect(page.html).toContain(`value="${handle}"`) // login_hint from the client
  const res = await signInAndAllow(pds.url, requestUri, { handle, password: PASSWORD }, page)
  expect(res.status, res.text).toBe(302)
  return new URL(res.headers.get('location')!)
}

describe('official OAuth client end to end', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    plc = createServer(async (req, res) => {
      const did = decodeURIComponent((req.url ?? '/').slice(1))
      const doc = await didDocFor(pds.services.db, did)
      if (!doc) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"DID not registered"}')
      res.writeHead(200, { 'content-type': 'application/did+ld+json' }).end(JSON.stringify(doc))
    })
    await new Promise<void>((resolve) => plc.listen(0, '127.0.0.1', resolve))
    plcUrl = `http://127.0.0.1:${(plc.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await new Promise((resolve) => plc?.close(resolve))
    await pds?.stop()
  })

  it('authorizes, calls getSession and createRecord through fetchHandler, refreshes and revokes', async () => {
    const created = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'official.test', email: 'official@example.com', password: PASSWORD },
    })
    expect(created.status).toBe(200)
    const did = created.body.did as string

    const { client, sessions } = newClient()
    const authUrl = await client.authorize('official.test', { scope: SCOPE })
    expect(authUrl.href.startsWith(`${pds.env.PDS_PUBLIC_URL}/oauth/authorize?`)).toBe(true)
    const callback = await signInThroughForm(authUrl, 'official.test')
    expect(callback.origin + callback.pathname).toBe(REDIRECT)

    const { session } = await client.callback(callback.searchParams)
    expect(session.did).toBe(did)
    const info = await session.getTokenInfo(false)
    expect(info.scope).toBe(SCOPE)
    expect(info.aud).toBe(`${pds.env.PDS_PUBLIC_URL}/`)

    const res = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ did, handle: 'official.test' })

    // a write with the DPoP-bound token: the record is in the repository afterwards
    const post = { $type: 'app.bsky.feed.post', text: 'hello over OAuth', createdAt: new Date().toISOString() }
    const write = await session.fetchHandler('/xrpc/com.atproto.repo.createRecord', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ repo: did, collection: 'app.bsky.feed.post', record: post }),
    })
    expect(write.status).toBe(200)
    const { uri } = (await write.json()) as any
    const rkey = uri.split('/').pop()
    const read = await xrpc(pds.url, 'com.atproto.repo.getRecord', {
      params: { repo: did, collection: 'app.bsky.feed.post', rkey },
    })
    expect(read.body.value.text).toBe('hello over OAuth')

    // a service token for a feed generator, through the same session, for one method only
    const sa = await session.fetchHandler(
      '/xrpc/com.atproto.server.getServiceAuth?aud=did:web:feed.example&lxm=app.bsky.feed.getFeedSkeleton',
    )
    expect(sa.status).toBe(200)
    expect(decodeJwt(((await sa.json()) as any).token)).toMatchObject({
      iss: did,
      aud: 'did:web:feed.example',
      lxm: 'app.bsky.feed.getFeedSkeleton',
    })
    const any = await session.fetchHandler('/xrpc/com.atproto.server.getServiceAuth?aud=did:web:feed.example')
    expect(any.status).toBe(403)
    // nor does it reach what would hand the account to someone else
    const apw = await session.fetchHandler('/xrpc/com.atproto.server.createAppPassword', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'from-oauth', privileged: true }),
    })
    expect([apw.status, ((await apw.json()) as any).error]).toEqual([403, 'InsufficientScope'])

    // refresh: a new token pair, the old refresh token is gone
    const before = sessions.m.get(did)!.tokenSet
    const refreshed = await client.restore(did, true)
    const after = sessions.m.get(did)!.tokenSet
    expect(after.refresh_token).not.toBe(before.refresh_token)
    expect(after.access_token).not.toBe(before.access_token)
    const oldJti = decodeJwt(before.refresh_token!).jti!
    expect(await pds.services.db.selectFrom('refresh_token').select('jti').where('jti', '=', oldJti).executeTakeFirst()).toBeUndefined()
    const again = await refreshed.fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(again.status).toBe(200)

    // an access token the server says has expired: the client refreshes on the challenge and retries
    const stored = sessions.m.get(did)!
    const claims = decodeJwt(stored.tokenSet.access_token)
    const now = Math.floor(Date.now() / 1000)
    const stale = await signEs256k(
      pds.services.oauth.key.keypair,
      { typ: 'at+jwt', kid: pds.services.oauth.key.kid },
      { ...claims, iat: now - 3600, exp: now - 1800 },
    )
    sessions.m.set(did, { ...stored, tokenSet: { ...stored.tokenSet, access_token: stale } })
    const retried = await (await client.restore(did, false)).fetchHandler('/xrpc/com.atproto.server.getSession')
    expect(retried.status).toBe(200)
    expect(sessions.m.get(did)!.tokenSet.access_token).not.toBe(stale)

    // revoke: the refresh record disappears and the session cannot be refreshed
    const newJti = decodeJwt(sessions.m.get(did)!.tokenSet.refresh_token!).jti!
    await (await client.restore(did, false)).signOut()
    expect(await pds.services.db.selectFrom('refresh_token').select('jti').where('jti', '=', newJti).executeTakeFirst()).toBeUndefined()
    expect(sessions.m.get(did)).toBeUndefined()
    await expect(client.restore(did, true)).rejects.toThrow()
  })

  it('reports access_denied to the client when the user denies', async () => {
    await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'denier.test', email: 'denier@example.com', password: PASSWORD },
    })
    const { client } = newClient()
    const authUrl = await client.authorize('denier.test', { scope: SCOPE })
    const requestUri = authUrl.searchParams.get('request_uri')!
    const page = await openPage(pds.url, requestUri)
    const res = await post(
      `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`,
      { action: 'deny', csrf_token: page.csrf },
      { cookie: page.cookie },
    )
    const loc = new URL(res.headers.get('location')!)
    await expect(client.callback(loc.searchParams)).rejects.toMatchObject({ params: expect.any(URLSearchParams) })
    expect(loc.searchParams.get('error')).toBe('access_denied')
  })
})
