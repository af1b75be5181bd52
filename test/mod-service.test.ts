// The moderation service (PDS_MOD_SERVICE_DID) on the moderator methods: its service token, from
// its DID (`#atproto` key) or as `did#atproto_labeler` (`#atproto_label` key), does what the admin
// password does there and nowhere else; every claim of the token is checked. A stand-in publishes
// the service's did:web document as Ozone's directory entry does.
import { Secp256k1Keypair } from '@atproto/crypto'
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, PASSWORD, describe, startTestPds, xrpc, type TestPds } from './harness.js'
import { subscribe } from './firehose-client.js'
import { didWebService, serviceToken } from './service-token.js'

let pds: TestPds
let mod: Awaited<ReturnType<typeof didWebService>>
let atprotoKey: Secp256k1Keypair
let labelKey: Secp256k1Keypair
let n = 0
const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
const UPDATE = 'com.atproto.admin.updateSubjectStatus'

const modToken = (lxm: string | undefined, extra: Record<string, unknown> = {}, key = atprotoKey, header: Record<string, unknown> = {}) =>
  serviceToken(key, { iss: mod.did, aud: 'did:web:localhost', ...(lxm ? { lxm } : {}), ...extra }, header)

async function newAgent() {
  n++
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle: `ozone${n}x.test`, email: `ozone${n}@example.com`, password: PASSWORD })
  return agent
}

const takedown = (did: string, applied: boolean, token: string) =>
  xrpc(pds.url, UPDATE, {
    body: { subject: { $type: 'com.atproto.admin.defs#repoRef', did }, takedown: { applied, ...(applied ? { ref: 'ozone-1' } : {}) } },
    headers: { authorization: `Bearer ${token}` },
  })

describe('the moderation service on the moderator methods', () => {
  beforeAll(async () => {
    atprotoKey = await Secp256k1Keypair.create()
    labelKey = await Secp256k1Keypair.create()
    mod = await didWebService({ atproto: atprotoKey, atproto_label: labelKey }, { atproto_labeler: 'AtprotoLabeler' })
    pds = await startTestPds({ PDS_MOD_SERVICE_DID: mod.did, PDS_MOD_SERVICE_URL: mod.url })
  })
  afterAll(async () => {
    await pds?.stop()
    await mod?.stop()
  })

  it('a takedown with its token ends the sessions, emits #account, stops serving blobs; reversal restores all', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const blob = (await agent.com.atproto.repo.uploadBlob(new Uint8Array([1, 2, 3]), { encoding: 'image/png' })).data.blob
    await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: {
        text: 'pic',
        createdAt: new Date().toISOString(),
        embed: { $type: 'app.bsky.embed.images', images: [{ image: blob, alt: '' }] },
      },
    })
    const cid = blob.ref.toString()
    const getBlob = () => xrpc(pds.url, 'com.atproto.sync.getBlob', { params: { did, cid } })
    expect((await getBlob()).status).toBe(200)
    const fh = await subscribe(pds.url)
    try {
      const down = await takedown(did, true, await modToken(UPDATE))
      expect(down.status).toBe(200)
      expect(down.body.takedown).toEqual({ applied: true, ref: 'ozone-1' })
      const frames = await fh.until((f) => f.some((x) => x.t === '#account' && x.body.did === did && x.body.status === 'takendown'))
      expect(frames.find((x) => x.t === '#account' && x.body.did === did)!.body.active).toBe(false)
      // the account's tokens stop working and it cannot sign in again
      expect(
        (await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `Bearer ${agent.session!.accessJwt}` } })).status,
      ).not.toBe(200)
      const login = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
      expect([login.status, login.body.error]).toEqual([401, 'AccountTakedown'])
      expect((await getBlob()).status).not.toBe(200)
      // the service reads back what it did
      const status = await xrpc(pds.url, 'com.atproto.admin.getSubjectStatus', {
        params: { did },
        headers: { authorization: `Bearer ${await modToken('com.atproto.admin.getSubjectStatus')}` },
      })
      expect(status.body.takedown).toEqual({ applied: true, ref: 'ozone-1' })

      const up = await takedown(did, false, await modToken(UPDATE))
      expect(up.status).toBe(200)
      await fh.until((f) => f.some((x) => x.t === '#account' && x.body.did === did && x.body.active === true))
      const back = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: did, password: PASSWORD } })
      expect(back.status).toBe(200)
      expect((await getBlob()).status).toBe(200)
    } finally {
      fh.close()
    }
  })

  it('accepts the labeler identity signed by its #atproto_label key, and a kid naming the key', async () => {
    const did = (await newAgent()).session!.did
    const labeler = await serviceToken(labelKey, { iss: `${mod.did}#atproto_labeler`, aud: 'did:web:localhost', lxm: UPDATE })
    expect((await takedown(did, true, labeler)).status).toBe(200)
    // the DID itself, with the header naming the label key instead of the default #atproto
    const kid = await modToken(UPDATE, {}, labelKey, { kid: '#atproto_label' })
    expect((await takedown(did, false, kid)).status).toBe(200)
    // without the kid, the label key is not the DID's #atproto key
    const wrong = await takedown(did, true, await modToken(UPDATE, {}, labelKey))
    expect([wrong.status, wrong.body.error]).toEqual([401, 'BadJwtSignature'])
  })

  it("accepts this server's DID as aud bare or as did#atproto_pds, and nothing else", async () => {
    const did = (await newAgent()).session!.did
    expect((await takedown(did, false, await modToken(UPDATE, { aud: 'did:web:localhost#atproto_pds' }))).status).toBe(200)
    for (const aud of ['did:web:elsewhere.example', 'did:web:localhost#bsky_appview']) {
      const res = await takedown(did, true, await modToken(UPDATE, { aud }))
      expect([aud, res.status, res.body.error]).toEqual([aud, 401, 'BadJwtAudience'])
    }
  })

  it('refuses a token for another method, for no method, expired, or from another issuer', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const cases: [string, string][] = [
      [await modToken('com.atproto.admin.getSubjectStatus'), 'BadJwtLexiconMethod'],
      [await modToken(undefined), 'BadJwtLexiconMethod'],
      [await modToken(UPDATE, { exp: Math.floor(Date.now() / 1000) - 1 }), 'JwtExpired'],
      [await serviceToken(atprotoKey, { iss: 'did:web:other.example', aud: 'did:web:localhost', lxm: UPDATE }), 'UntrustedIss'],
      [await serviceToken(await Secp256k1Keypair.create(), { iss: mod.did, aud: 'did:web:localhost', lxm: UPDATE }), 'BadJwtSignature'],
    ]
    for (const [token, error] of cases) {
      const res = await takedown(did, true, token)
      expect([res.status, res.body.error]).toEqual([401, error])
    }
    // nothing happened to the account
    expect(
      (await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `Bearer ${agent.session!.accessJwt}` } })).status,
    ).toBe(200)
  })

  it('reaches the other moderator methods, and no other admin method', async () => {
    const did = (await newAgent()).session!.did
    const infos = await xrpc(pds.url, 'com.atproto.admin.getAccountInfos', {
      params: { dids: did },
      headers: { authorization: `Bearer ${await modToken('com.atproto.admin.getAccountInfos')}` },
    })
    expect([infos.status, infos.body.infos[0].did]).toEqual([200, did])
    const mail = await xrpc(pds.url, 'com.atproto.admin.sendEmail', {
      body: { recipientDid: did, senderDid: mod.did, content: 'About your post' },
      headers: { authorization: `Bearer ${await modToken('com.atproto.admin.sendEmail')}` },
    })
    expect([mail.status, mail.body]).toEqual([200, { sent: true }])
    for (const [nsid, opts] of [
      ['com.atproto.admin.getAccountInfo', { params: { did } }],
      ['com.atproto.admin.deleteAccount', { body: { did } }],
      ['com.atproto.admin.updateAccountPassword', { body: { did, password: 'another password 1234' } }],
    ] as const) {
      const res = await xrpc(pds.url, nsid, { ...opts, headers: { authorization: `Bearer ${await modToken(nsid)}` } })
      expect([nsid, res.status]).toEqual([nsid, 401])
    }
    // the admin password still works on the moderator methods
    const viaBasic = await xrpc(pds.url, 'com.atproto.admin.getSubjectStatus', { params: { did }, headers: basic })
    expect(viaBasic.status).toBe(200)
  })
})

describe('without a moderation service', () => {
  it('refuses every service token on the moderator methods with UntrustedIss', async () => {
    const key = await Secp256k1Keypair.create()
    const server = await startTestPds()
    try {
      const did = (
        await xrpc(server.url, 'com.atproto.server.createAccount', {
          body: { handle: 'nomod.test', email: 'nomod@example.com', password: PASSWORD },
        })
      ).body.did
      const token = await serviceToken(key, { iss: 'did:web:mod.example', aud: 'did:web:localhost', lxm: UPDATE })
      const res = await xrpc(server.url, UPDATE, {
        body: { subject: { $type: 'com.atproto.admin.defs#repoRef', did }, takedown: { applied: true } },
        headers: { authorization: `Bearer ${token}` },
      })
      expect([res.status, res.body.error]).toEqual([401, 'UntrustedIss'])
    } finally {
      await server.stop()
    }
  })
})
