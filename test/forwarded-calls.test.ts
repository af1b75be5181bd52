// Calls this server forwards to the network's services with a token minted for the right
// audience and method: a custom feed (the token is for the feed's generator), reports (to the
// report or moderation service), push registration (to the service the body names). Stand-ins on
// loopback verify each token as the real services do (@atproto/xrpc-server's verifyJwt against the
// user's DID document); an AppView stand-in hands getFeed's token on to the generator, as the
// real AppView does.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { verifyJwt } from '@atproto/xrpc-server'
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { ADMIN_PASSWORD, PASSWORD, describe, startTestPds, xrpc, type TestPds } from './harness.js'
import { didWebService } from './service-token.js'

let pds: TestPds
let n = 0
type Seen = { lxm: string; claims: { iss: string; aud: string; lxm?: string }; body?: any; url: string; token: string }
/** the generator records the stand-in AppView serves through com.atproto.repo.getRecord */
const appviewRecords = new Map<string, Record<string, unknown>>()

let revised: TestPds | undefined
/** the signing key of a user of `pds` (or of the second server), from its DID document */
const userKey = async (iss: string) => {
  const doc = (await didDocFor(pds.services.db, iss)) ?? (revised && (await didDocFor(revised.services.db, iss)))
  return `did:key:${doc!.verificationMethod[0].publicKeyMultibase}`
}

async function readJson(req: IncomingMessage) {
  let text = ''
  for await (const chunk of req) text += chunk
  return text ? JSON.parse(text) : undefined
}

function send(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** a service that verifies every call's token for its own DID (or, `skipAud`, any audience) */
async function verifyingService(
  services: Record<string, string>,
  answer: (s: Seen, res: ServerResponse) => unknown,
  opts: { skipAud?: boolean; lxms?: string[] } = {},
) {
  const seen: Seen[] = []
  const svc = await didWebService({}, services, (req, res) => {
    void (async () => {
      const url = new URL(req.url!, 'http://x')
      const lxm = url.pathname.replace('/xrpc/', '')
      if (lxm === 'com.atproto.repo.getRecord') {
        const q = url.searchParams
        const value = appviewRecords.get(`at://${q.get('repo')}/${q.get('collection')}/${q.get('rkey')}`)
        return value ? send(res, 200, { uri: '', value }) : send(res, 400, { error: 'RecordNotFound', message: 'Could not locate record' })
      }
      const jwt = (req.headers.authorization ?? '').replace(/^Bearer /, '')
      let claims
      try {
        // the revised rules: the service's DID, bare or naming one of its services
        claims = await verifyJwt(jwt, null, opts.lxms ? null : lxm, userKey)
        if (!opts.skipAud && claims.aud !== svc.did && !claims.aud.startsWith(`${svc.did}#`)) throw new Error(`bad aud ${claims.aud}`)
        if (opts.lxms && !opts.lxms.includes(claims.lxm as string)) throw new Error(`bad lxm ${claims.lxm}`)
      } catch (err) {
        return send(res, 401, { error: 'AuthenticationRequired', message: String(err) })
      }
      const s: Seen = { lxm, claims, token: jwt, url: req.url!, body: req.method === 'POST' ? await readJson(req) : undefined }
      seen.push(s)
      await answer(s, res)
    })().catch((err) => send(res, 500, { error: 'InternalServerError', message: String(err) }))
  })
  return Object.assign(svc, { seen })
}

let feedgen: Awaited<ReturnType<typeof verifyingService>>
let appview: Awaited<ReturnType<typeof verifyingService>>
let moderation: Awaited<ReturnType<typeof verifyingService>>
let reports: Awaited<ReturnType<typeof verifyingService>>
let push: Awaited<ReturnType<typeof verifyingService>>
const FEED = 'at://did:plc:feedpublisher0000000000/app.bsky.feed.generator/cats'

async function newAgent() {
  n++
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle: `net${n}x.test`, email: `net${n}@example.com`, password: PASSWORD })
  return agent
}

const reportOutput = (s: Seen) => ({
  id: 7,
  reasonType: s.body.reasonType,
  subject: s.body.subject,
  reportedBy: s.claims.iss,
  createdAt: new Date().toISOString(),
})

describe('calls forwarded to the services of the network', () => {
  beforeAll(async () => {
    feedgen = await verifyingService({ bsky_fg: 'BskyFeedGenerator' }, (s, res) =>
      send(res, 200, { feed: [{ post: 'at://did:plc:a/app.bsky.feed.post/1' }], cursor: 'c2', viewer: s.claims.iss }),
    )
    // as the AppView: any audience on getFeed (the token is for the generator), then the
    // generator is asked with the very same Authorization header
    appview = await verifyingService(
      { bsky_appview: 'BskyAppView', bsky_notif: 'BskyNotificationService' },
      async (s, res) => {
        if (s.lxm === 'app.bsky.feed.getFeed') {
          const feed = new URL(s.url, 'http://x').searchParams.get('feed')
          const skel = await fetch(`${feedgen.url}/xrpc/app.bsky.feed.getFeedSkeleton?feed=${encodeURIComponent(feed!)}`, {
            headers: { authorization: `Bearer ${s.token}` },
          })
          const body = (await skel.json()) as { cursor?: string }
          if (skel.status !== 200) return send(res, skel.status, body)
          return send(res, 200, { feed: [], cursor: body.cursor })
        }
        send(res, 200, {})
      },
      {
        skipAud: true,
        lxms: ['app.bsky.feed.getFeed', 'app.bsky.feed.getFeedSkeleton', 'app.bsky.notification.registerPush', 'app.bsky.feed.getTimeline'],
      },
    )
    moderation = await verifyingService({ atproto_labeler: 'AtprotoLabeler' }, (s, res) => send(res, 200, reportOutput(s)))
    reports = await verifyingService({ atproto_labeler: 'AtprotoLabeler' }, (s, res) => send(res, 200, reportOutput(s)))
    push = await verifyingService({ bsky_notif: 'BskyNotificationService' }, (_s, res) => {
      res.writeHead(200).end()
    })
    pds = await startTestPds({
      PDS_BSKY_APP_VIEW_URL: appview.url,
      PDS_BSKY_APP_VIEW_DID: appview.did,
      PDS_MOD_SERVICE_URL: moderation.url,
      PDS_MOD_SERVICE_DID: moderation.did,
    })
    appviewRecords.set(FEED, { did: feedgen.did, displayName: 'Cats' })
  })
  afterAll(async () => {
    await pds?.stop()
    for (const s of [feedgen, appview, moderation, reports, push]) await s?.stop()
  })

  it('getFeed: mints the token for the generator (aud its DID, lxm getFeedSkeleton) and the generator accepts it', async () => {
    const agent = await newAgent()
    const res = await agent.app.bsky.feed.getFeed({ feed: FEED, limit: 5 })
    expect(res.data).toEqual({ feed: [], cursor: 'c2' })
    const [at, gen] = [appview.seen.at(-1)!, feedgen.seen.at(-1)!]
    expect(at.lxm).toBe('app.bsky.feed.getFeed')
    expect(new URL(at.url, 'http://x').searchParams.get('limit')).toBe('5')
    expect(gen.claims).toMatchObject({ iss: agent.session!.did, aud: feedgen.did, lxm: 'app.bsky.feed.getFeedSkeleton' })
  })

  it('getFeed: a generator record without a did is UnknownFeed', async () => {
    const agent = await newAgent()
    const uri = 'at://did:plc:feedpublisher0000000000/app.bsky.feed.generator/nodid'
    appviewRecords.set(uri, { displayName: 'No did' })
    await expect(agent.app.bsky.feed.getFeed({ feed: uri })).rejects.toMatchObject({ status: 400, error: 'UnknownFeed' })
    await expect(
      agent.app.bsky.feed.getFeed({ feed: 'at://did:plc:feedpublisher0000000000/app.bsky.feed.generator/missing' }),
    ).rejects.toMatchObject({ status: 400, error: 'UnknownFeed' })
  })

  it('createReport without a header goes to the moderation service with a token for createReport', async () => {
    const agent = await newAgent()
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: 'did:plc:someoneelse00000000000000' }
    const res = await agent.com.atproto.moderation.createReport({ reasonType: 'com.atproto.moderation.defs#reasonSpam', subject })
    expect(res.data).toMatchObject({ id: 7, reportedBy: agent.session!.did, subject })
    expect(moderation.seen.at(-1)!.claims).toMatchObject({
      iss: agent.session!.did,
      aud: moderation.did,
      lxm: 'com.atproto.moderation.createReport',
    })
  })

  it('createReport follows an atproto-proxy header to the labeler it names', async () => {
    const agent = await newAgent()
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: 'did:plc:someoneelse00000000000000' }
    const before = moderation.seen.length
    const res = await xrpc(pds.url, 'com.atproto.moderation.createReport', {
      body: { reasonType: 'com.atproto.moderation.defs#reasonRude', subject },
      headers: { authorization: `Bearer ${agent.session!.accessJwt}`, 'atproto-proxy': `${reports.did}#atproto_labeler` },
    })
    expect(res.status, res.text).toBe(200)
    expect(reports.seen.at(-1)!.claims).toMatchObject({ aud: reports.did, lxm: 'com.atproto.moderation.createReport' })
    expect(moderation.seen.length).toBe(before)
  })

  it('a taken-down account may still sign in to report (allowTakendown), and do nothing else', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
    const down = await xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject: { $type: 'com.atproto.admin.defs#repoRef', did }, takedown: { applied: true } },
      headers: basic,
    })
    expect(down.status).toBe(200)
    const refused = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
    expect([refused.status, refused.body.error]).toEqual([401, 'AccountTakedown'])
    const session = await xrpc(pds.url, 'com.atproto.server.createSession', {
      body: { identifier: did, password: PASSWORD, allowTakendown: true },
    })
    expect(session.status, session.text).toBe(200)
    expect(session.body).toMatchObject({ did, active: false, status: 'takendown' })
    const auth = { authorization: `Bearer ${session.body.accessJwt}` }
    const report = await xrpc(pds.url, 'com.atproto.moderation.createReport', {
      body: { reasonType: 'com.atproto.moderation.defs#reasonAppeal', subject: { $type: 'com.atproto.admin.defs#repoRef', did } },
      headers: auth,
    })
    expect(report.status, report.text).toBe(200)
    expect(moderation.seen.at(-1)!.claims).toMatchObject({ iss: did, lxm: 'com.atproto.moderation.createReport' })
    const post = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      body: { repo: did, collection: 'app.bsky.feed.post', record: { text: 'x', createdAt: new Date().toISOString() } },
      headers: auth,
    })
    expect([post.status, post.body.error]).toEqual([401, 'InvalidToken'])
    for (const nsid of ['com.atproto.server.getSession', 'app.bsky.feed.getTimeline']) {
      expect((await xrpc(pds.url, nsid, { headers: auth })).status).toBe(401)
    }
    // an account in good standing gets an ordinary session with the flag
    const other = await newAgent()
    const ordinary = await xrpc(pds.url, 'com.atproto.server.createSession', {
      body: { identifier: other.session!.did, password: PASSWORD, allowTakendown: true },
    })
    const write = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      body: { repo: other.session!.did, collection: 'app.bsky.feed.post', record: { text: 'y', createdAt: new Date().toISOString() } },
      headers: { authorization: `Bearer ${ordinary.body.accessJwt}` },
    })
    expect(write.status).toBe(200)
  })

  it('registerPush and unregisterPush go to the service the body names, the token addressed to it', async () => {
    const agent = await newAgent()
    const body = { serviceDid: push.did, token: 'device-token', platform: 'ios', appId: 'xyz.blueskyweb.app' }
    await agent.app.bsky.notification.registerPush(body)
    expect(push.seen.at(-1)).toMatchObject({ lxm: 'app.bsky.notification.registerPush', body, claims: { aud: push.did } })
    await agent.app.bsky.notification.unregisterPush(body)
    expect(push.seen.at(-1)).toMatchObject({ lxm: 'app.bsky.notification.unregisterPush', claims: { aud: push.did } })
    // the AppView's own notification service is reached at its configured URL
    await agent.app.bsky.notification.registerPush({ ...body, serviceDid: appview.did })
    expect(appview.seen.at(-1)).toMatchObject({ lxm: 'app.bsky.notification.registerPush', claims: { aud: appview.did } })
    // a DID without a notification service
    await expect(agent.app.bsky.notification.registerPush({ ...body, serviceDid: feedgen.did })).rejects.toMatchObject({ status: 400 })
  })

  it('PDS_SERVICE_AUTH_AUD_SERVICE_ID=true: outgoing tokens name the service as did#serviceId', async () => {
    revised = await startTestPds({
      PDS_BSKY_APP_VIEW_URL: appview.url,
      PDS_BSKY_APP_VIEW_DID: appview.did,
      PDS_MOD_SERVICE_URL: moderation.url,
      PDS_MOD_SERVICE_DID: moderation.did,
      PDS_SERVICE_AUTH_AUD_SERVICE_ID: 'true',
    })
    try {
      const agent = new AtpAgent({ service: revised.url })
      await agent.createAccount({ handle: 'revised.test', email: 'revised@example.com', password: PASSWORD })
      await xrpc(revised.url, 'app.bsky.feed.getTimeline', { headers: { authorization: `Bearer ${agent.session!.accessJwt}` } })
      expect(appview.seen.at(-1)!.claims).toMatchObject({ aud: `${appview.did}#bsky_appview`, lxm: 'app.bsky.feed.getTimeline' })
      const subject = { $type: 'com.atproto.admin.defs#repoRef', did: 'did:plc:someoneelse00000000000000' }
      await agent.com.atproto.moderation.createReport({ reasonType: 'com.atproto.moderation.defs#reasonSpam', subject })
      expect(moderation.seen.at(-1)!.claims.aud).toBe(`${moderation.did}#atproto_labeler`)
    } finally {
      await revised.stop()
      revised = undefined
    }
  })
})
