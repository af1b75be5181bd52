// With the network's real services (test/network-services.ts): Ozone takes an account down through
// its own moderation API and pushes the takedown here with its service token, and reverses it;
// a report without an atproto-proxy header reaches Ozone; a custom feed read through the real
// AppView reaches a feed generator that checks its token's audience and method.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { verifyJwt } from '@atproto/xrpc-server'
import type { AtpAgent } from '@atproto/api'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { PASSWORD, newAgent, startTestPds, xrpc, type TestPds } from './harness.js'
import { describeNetwork, startNetwork, type AppView, type Network, type Ozone } from './network-services.js'
import { subscribe } from './firehose-client.js'
import { didWebService } from './service-token.js'

let net: Network
let pds: TestPds
let appview: AppView
let ozone: Ozone
let feedgen: Awaited<ReturnType<typeof didWebService>>
let skeletonPosts: string[] = []
const feedgenSaw: { aud: string; lxm?: string; iss: string }[] = []

/** a user's current #atproto key, from the PLC directory, as a feed generator looks it up */
async function plcKey(did: string): Promise<string> {
  const data = (await (await fetch(`${net.plcUrl}/${did}/data`)).json()) as { verificationMethods: Record<string, string> }
  return data.verificationMethods.atproto
}

// a feed generator: verifies the viewer's token is for it and for getFeedSkeleton
function feedGenerator(req: IncomingMessage, res: ServerResponse) {
  void (async () => {
    const url = new URL(req.url!, 'http://x')
    const jwt = (req.headers.authorization ?? '').replace(/^Bearer /, '')
    try {
      const claims = await verifyJwt(jwt, feedgen.did, 'app.bsky.feed.getFeedSkeleton', plcKey)
      feedgenSaw.push(claims)
    } catch (err) {
      res.writeHead(401, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ error: 'AuthenticationRequired', message: String(err) }))
    }
    if (url.pathname !== '/xrpc/app.bsky.feed.getFeedSkeleton') return res.writeHead(404).end()
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ feed: skeletonPosts.map((post) => ({ post })) }))
  })()
}

const moderator = async (lxm: string) => {
  const headers = await ozone.memberHeaders(lxm, 'moderator')
  return { headers, did: decodeJwt(headers.authorization.slice('Bearer '.length)).iss as string }
}

async function emit(event: Record<string, unknown>, did: string) {
  const lxm = 'tools.ozone.moderation.emitEvent'
  const { headers, did: createdBy } = await moderator(lxm)
  const res = await fetch(`${ozone.url}/xrpc/${lxm}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ event, subject: { $type: 'com.atproto.admin.defs#repoRef', did }, createdBy }),
  })
  expect(res.status, await res.clone().text()).toBe(200)
  // Ozone pushes the event to the account's server from its queue
  await ozone.process()
}

describeNetwork('the moderation service and the AppView from the registry', () => {
  beforeAll(async () => {
    feedgen = await didWebService({}, { bsky_fg: 'BskyFeedGenerator' }, feedGenerator)
    net = await startNetwork()
    pds = await startTestPds(net.pdsEnv)
    appview = await net.startAppView({ pds })
    ozone = await net.startOzone({ pds })
  }, 120_000)
  afterAll(async () => {
    await net?.stop()
    await pds?.stop()
    await feedgen?.stop()
  })

  it("Ozone's takedown ends the account's sessions and emits #account; its reversal restores the account", async () => {
    const agent = await newAgent(pds.url, 'ozonetd')
    const did = agent.session!.did
    const fh = await subscribe(pds.url)
    try {
      await emit({ $type: 'tools.ozone.moderation.defs#modEventTakedown', comment: 'spam ring' }, did)
      await fh.until((f) => f.some((x) => x.t === '#account' && x.body.did === did && x.body.status === 'takendown'))
      const session = await xrpc(pds.url, 'com.atproto.server.getSession', {
        headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
      })
      expect(session.status).not.toBe(200)
      const login = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
      expect([login.status, login.body.error]).toEqual([401, 'AccountTakedown'])

      await emit({ $type: 'tools.ozone.moderation.defs#modEventReverseTakedown', comment: 'appeal granted' }, did)
      await fh.until((f) => f.some((x) => x.t === '#account' && x.body.did === did && x.body.active === true))
      const back = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
      expect(back.status).toBe(200)
    } finally {
      fh.close()
    }
  })

  it('a report without an atproto-proxy header reaches Ozone', async () => {
    const reporter = await newAgent(pds.url, 'noproxy')
    const target = await newAgent(pds.url, 'noproxytarget')
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: target.session!.did }
    const report = await reporter.com.atproto.moderation.createReport({ reasonType: 'com.atproto.moderation.defs#reasonSpam', subject })
    expect(report.data.reportedBy).toBe(reporter.session!.did)
    const lxm = 'tools.ozone.moderation.queryStatuses'
    const { headers } = await moderator(lxm)
    const res = await fetch(`${ozone.url}/xrpc/${lxm}?subject=${target.session!.did}`, { headers })
    const body: any = await res.json()
    expect(body.subjectStatuses.map((s: any) => s.subject.did)).toEqual([target.session!.did])
  })

  it("a custom feed: the AppView hands the viewer's token to the generator, which accepts its audience", async () => {
    const author: AtpAgent = await newAgent(pds.url, 'feedauthor')
    const did = author.session!.did
    const post = await author.app.bsky.feed.post.create({ repo: did }, { text: 'a cat', createdAt: new Date().toISOString() })
    const gen = await author.app.bsky.feed.generator.create(
      { repo: did, rkey: 'cats' },
      { did: feedgen.did, displayName: 'Cats', createdAt: new Date().toISOString() },
    )
    await appview.catchUp(pds)
    skeletonPosts = [post.uri]
    const viewer = await newAgent(pds.url, 'feedviewer')
    const res = await viewer.app.bsky.feed.getFeed({ feed: gen.uri })
    expect(res.data.feed.map((item) => item.post.uri)).toEqual([post.uri])
    expect(feedgenSaw.at(-1)).toMatchObject({ iss: viewer.session!.did, aud: feedgen.did, lxm: 'app.bsky.feed.getFeedSkeleton' })

    // a generator record that names no generator
    const bad = await author.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.generator',
      rkey: 'nodid',
      record: { displayName: 'No did', createdAt: new Date().toISOString() },
      validate: false,
    })
    await appview.catchUp(pds)
    await expect(viewer.app.bsky.feed.getFeed({ feed: bad.data.uri })).rejects.toMatchObject({ status: 400, error: 'UnknownFeed' })
  })
})
