// The real Bluesky AppView (test/network-services.ts) following this server's firehose: what an
// account writes here is indexed there and comes back through this server's AppView proxy.
import type { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { newAgent, startTestPds, type TestPds } from './harness.js'
import { describeNetwork, startNetwork, type AppView, type Network, type Ozone } from './network-services.js'

let net: Network
let pds: TestPds
let appview: AppView
let ozone: Ozone

describeNetwork('the AppView from the registry', () => {
  beforeAll(async () => {
    net = await startNetwork()
    pds = await startTestPds(net.pdsEnv)
    appview = await net.startAppView({ pds })
    ozone = await net.startOzone({ pds })
  }, 120_000)
  afterAll(async () => {
    await net?.stop()
    await pds?.stop()
  })

  it('indexes a profile and a post, served back through the proxy', async () => {
    const agent: AtpAgent = await newAgent(pds.url, 'smoke')
    const did = agent.session!.did
    await agent.app.bsky.actor.profile.create({ repo: did }, { displayName: 'Smoke Test', description: 'hello' })
    const post = await agent.app.bsky.feed.post.create({ repo: did }, { text: 'first post', createdAt: new Date().toISOString() })
    await appview.catchUp(pds)

    const profile = await agent.app.bsky.actor.getProfile({ actor: did })
    expect(profile.data.did).toBe(did)
    expect(profile.data.handle).toBe(agent.session!.handle)
    expect(profile.data.displayName).toBe('Smoke Test')
    expect(profile.data.postsCount).toBe(1)

    const thread = await agent.app.bsky.feed.getPostThread({ uri: post.uri })
    const view = thread.data.thread as any
    expect(view.post.uri).toBe(post.uri)
    expect(view.post.record.text).toBe('first post')
    expect(view.post.author.displayName).toBe('Smoke Test')
  })

  it('Ozone receives a report sent through the proxy and lists it for its moderators', async () => {
    const agent = await newAgent(pds.url, 'reporter')
    const target = await newAgent(pds.url, 'reported')
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: target.session!.did }
    const report = await agent.com.atproto.moderation.createReport(
      { reasonType: 'com.atproto.moderation.defs#reasonSpam', subject },
      { headers: { 'atproto-proxy': `${ozone.did}#atproto_labeler` } },
    )
    expect(report.data.reportedBy).toBe(agent.session!.did)

    const lxm = 'tools.ozone.moderation.queryStatuses'
    const res = await fetch(`${ozone.url}/xrpc/${lxm}?subject=${target.session!.did}`, { headers: await ozone.memberHeaders(lxm) })
    expect(res.status).toBe(200)
    const body: any = await res.json()
    expect(body.subjectStatuses.map((s: any) => s.subject.did)).toEqual([target.session!.did])
    expect(body.subjectStatuses[0].reviewState).toBe('tools.ozone.moderation.defs#reviewOpen')
  })
})
