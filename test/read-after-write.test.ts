// Read-after-write through the real AppView: while its ingester is held back (the records reach it
// but wait to be indexed), the author's own new profile, posts and replies show at once in the six
// methods the proxy amends, marked with atproto-upstream-lag; others' records never do.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import type { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAgent, startTestPds, xrpc, type TestPds } from './harness.js'
import { describeNetwork, latestSeq, startNetwork, type AppView, type Network } from './network-services.js'

let net: Network
let pds: TestPds
let appview: AppView
let alice: AtpAgent
let bob: AtpAgent
let first: { uri: string; cid: string }
let fresh: { uri: string; cid: string }
let reply: { uri: string; cid: string }
let bobPost: { uri: string; cid: string }

const now = () => new Date().toISOString()

describeNetwork('read-after-write', () => {
  beforeAll(async () => {
    net = await startNetwork()
    pds = await startTestPds(net.pdsEnv)
    appview = await net.startAppView({ pds })
    alice = await newAgent(pds.url, 'raw')
    bob = await newAgent(pds.url, 'rawbob')
    const did = alice.session!.did
    await alice.app.bsky.actor.profile.create({ repo: did, rkey: 'self' }, { displayName: 'Alice Before', description: 'old words' })
    first = await alice.app.bsky.feed.post.create({ repo: did }, { text: 'first', createdAt: now() })
    await alice.app.bsky.feed.like.create({ repo: did }, { subject: first, createdAt: now() })
    await alice.app.bsky.graph.follow.create({ repo: did }, { subject: bob.session!.did, createdAt: now() })
    await appview.catchUp(pds)

    // from here the AppView receives but does not index
    await appview.hold()
    await alice.app.bsky.actor.profile.put({ repo: did, rkey: 'self' }, { displayName: 'Alice After', description: 'new words' })
    fresh = await alice.app.bsky.feed.post.create({ repo: did }, { text: 'fresh post', createdAt: now() })
    reply = await alice.app.bsky.feed.post.create(
      { repo: did },
      { text: 'a reply', reply: { root: first, parent: first }, createdAt: now() },
    )
    bobPost = await bob.app.bsky.feed.post.create({ repo: bob.session!.did }, { text: 'from bob', createdAt: now() })
    expect(await appview.cursor()).toBeLessThan(await latestSeq(pds))
  }, 180_000)
  afterAll(async () => {
    await appview?.release()
    await net?.stop()
    await pds?.stop()
  })

  const amended = (headers: Record<string, string | undefined>) => {
    expect(Number(headers['atproto-upstream-lag'])).toBeGreaterThanOrEqual(0)
    expect(headers['atproto-repo-rev']).toBeUndefined()
  }

  it('getProfile shows the new profile record', async () => {
    const res = await alice.app.bsky.actor.getProfile({ actor: alice.session!.did })
    expect(res.data.displayName).toBe('Alice After')
    expect(res.data.description).toBe('new words')
    amended(res.headers)
    // by handle too, and another account's profile is left as the AppView has it
    expect((await alice.app.bsky.actor.getProfile({ actor: alice.session!.handle })).data.displayName).toBe('Alice After')
    const other = await alice.app.bsky.actor.getProfile({ actor: bob.session!.did })
    expect(other.headers['atproto-upstream-lag']).toBeUndefined()
  })

  it('getProfiles shows it for the requester only', async () => {
    const res = await alice.app.bsky.actor.getProfiles({ actors: [alice.session!.did, bob.session!.did] })
    const byDid = new Map(res.data.profiles.map((p) => [p.did, p]))
    expect(byDid.get(alice.session!.did)!.displayName).toBe('Alice After')
    expect(byDid.get(bob.session!.did)!.handle).toBe(bob.session!.handle)
    amended(res.headers)
  })

  it('getAuthorFeed lists the new posts first, by the new name', async () => {
    const res = await alice.app.bsky.feed.getAuthorFeed({ actor: alice.session!.did })
    const uris = res.data.feed.map((i) => i.post.uri)
    expect(uris.slice(0, 3)).toEqual([reply.uri, fresh.uri, first.uri])
    expect(res.data.feed.every((i) => i.post.author.displayName === 'Alice After')).toBe(true)
    expect((res.data.feed[1].post.record as any).text).toBe('fresh post')
    amended(res.headers)
    // without replies, the reply stays out
    const noReplies = await alice.app.bsky.feed.getAuthorFeed({ actor: alice.session!.did, filter: 'posts_no_replies' })
    expect(noReplies.data.feed.map((i) => i.post.uri)).toEqual([fresh.uri, first.uri])
  })

  it("getTimeline shows the requester's new posts and not others' unindexed ones", async () => {
    const res = await alice.app.bsky.feed.getTimeline({})
    const uris = res.data.feed.map((i) => i.post.uri)
    expect(uris).toContain(fresh.uri)
    expect(uris).toContain(reply.uri)
    expect(uris).not.toContain(bobPost.uri)
    amended(res.headers)
  })

  it('getPostThread shows the new reply, and a thread of a post the AppView has not seen', async () => {
    const res = await alice.app.bsky.feed.getPostThread({ uri: first.uri })
    const thread = res.data.thread as any
    expect(thread.replies.map((r: any) => r.post.uri)).toContain(reply.uri)
    amended(res.headers)

    const own = await alice.app.bsky.feed.getPostThread({ uri: reply.uri })
    const view = own.data.thread as any
    expect(view.post.uri).toBe(reply.uri)
    expect(view.post.author.displayName).toBe('Alice After')
    expect(view.parent.post.uri).toBe(first.uri)
    amended(own.headers)
  })

  it("getActorLikes shows the requester's new profile on the liked posts", async () => {
    const res = await alice.app.bsky.feed.getActorLikes({ actor: alice.session!.did })
    expect(res.data.feed.map((i) => i.post.uri)).toEqual([first.uri])
    expect(res.data.feed[0].post.author.displayName).toBe('Alice After')
    amended(res.headers)
  })

  it('once the AppView has indexed everything, its answers pass through with its atproto-repo-rev', async () => {
    await appview.release()
    await appview.catchUp(pds)
    const res = await alice.app.bsky.actor.getProfile({ actor: alice.session!.did })
    expect(res.data.displayName).toBe('Alice After')
    expect(res.headers['atproto-repo-rev']).toMatch(/^[a-z2-7]{13}$/)
    expect(res.headers['atproto-upstream-lag']).toBeUndefined()
    const feed = await alice.app.bsky.feed.getAuthorFeed({ actor: alice.session!.did })
    expect(feed.data.feed.map((i) => i.post.uri).slice(0, 3)).toEqual([reply.uri, fresh.uri, first.uri])
  })
})

// The bounds, against a stand-in AppView whose answers the test chooses: a real one would add nothing
describe('read-after-write bounds', () => {
  let stand: Server
  let standPds: TestPds
  let answer: { headers: Record<string, string>; body: Buffer }
  let agent: AtpAgent
  let rev: string

  const profileView = (extra: Record<string, unknown> = {}) => ({
    did: agent.session!.did,
    handle: agent.session!.handle,
    displayName: 'Stale',
    ...extra,
  })
  const reply = (body: unknown, headers: Record<string, string> = {}) => {
    answer = { body: Buffer.from(JSON.stringify(body)), headers: { 'content-type': 'application/json', ...headers } }
  }

  beforeAll(async () => {
    stand = createServer((_req, res) => {
      res.writeHead(200, { ...answer.headers, 'content-length': String(answer.body.length) })
      res.end(answer.body)
    })
    await new Promise<void>((r) => stand.listen(0, '127.0.0.1', () => r()))
    const url = `http://127.0.0.1:${(stand.address() as AddressInfo).port}`
    standPds = await startTestPds({ PDS_BSKY_APP_VIEW_URL: url, PDS_BSKY_APP_VIEW_DID: 'did:web:appview.example' })
    agent = await newAgent(standPds.url, 'rawbound')
    const did = agent.session!.did
    // what the stand-in "has indexed": up to this post; the profile comes after
    const post = await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: { text: 'x', createdAt: now() },
    })
    rev = post.data.commit!.rev
    await agent.app.bsky.actor.profile.create({ repo: did, rkey: 'self' }, { displayName: 'Fresh' })
  })
  afterAll(async () => {
    await standPds?.stop()
    stand?.close()
  })

  it('amends a small valid answer that carries atproto-repo-rev', async () => {
    reply(profileView(), { 'atproto-repo-rev': rev })
    const res = await agent.app.bsky.actor.getProfile({ actor: agent.session!.did })
    expect(res.data.displayName).toBe('Fresh')
    expect(res.headers['atproto-upstream-lag']).toBeDefined()
  })

  it('decodes a gzip answer before amending it', async () => {
    answer = {
      body: gzipSync(JSON.stringify(profileView())),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'atproto-repo-rev': rev },
    }
    const res = await xrpc(standPds.url, 'app.bsky.actor.getProfile', {
      params: { actor: agent.session!.did },
      headers: bearer(agent.session!.accessJwt),
    })
    expect(res.status).toBe(200)
    expect(res.body.displayName).toBe('Fresh')
  })

  it('passes the answer through without atproto-repo-rev', async () => {
    reply(profileView())
    const res = await agent.app.bsky.actor.getProfile({ actor: agent.session!.did })
    expect(res.data.displayName).toBe('Stale')
    expect(res.headers['atproto-upstream-lag']).toBeUndefined()
  })

  it('passes a large answer through untouched', async () => {
    // valid, and over the bound only by its labels
    const label = { src: 'did:plc:labeler', uri: agent.session!.did, val: 'tag', cts: now() }
    reply(profileView({ labels: Array.from({ length: 12_000 }, () => label) }), { 'atproto-repo-rev': rev })
    expect(answer.body.length).toBeGreaterThan(1024 * 1024)
    const res = await xrpc(standPds.url, 'app.bsky.actor.getProfile', {
      params: { actor: agent.session!.did },
      headers: bearer(agent.session!.accessJwt),
    })
    expect(res.status).toBe(200)
    expect(res.body.displayName).toBe('Stale')
    expect(res.body.labels).toHaveLength(12_000)
  })

  it('passes an answer its lexicon refuses through untouched', async () => {
    reply({ did: agent.session!.did, displayName: 'Stale' }, { 'atproto-repo-rev': rev })
    const res = await xrpc(standPds.url, 'app.bsky.actor.getProfile', {
      params: { actor: agent.session!.did },
      headers: bearer(agent.session!.accessJwt),
    })
    expect(res.body).toEqual({ did: agent.session!.did, displayName: 'Stale' })
    expect(res.headers.get('atproto-repo-rev')).toBe(rev)
  })

  it("leaves another account's profile alone", async () => {
    reply({ did: 'did:plc:someoneelse', handle: 'someone.test', displayName: 'Them' }, { 'atproto-repo-rev': rev })
    const res = await agent.app.bsky.actor.getProfile({ actor: 'did:plc:someoneelse' })
    expect(res.data.displayName).toBe('Them')
  })
})
