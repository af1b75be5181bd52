// Hosting a DID that moves in must be proven by whoever controls it: createAccount with `did`
// needs a service-auth token from the DID's current key or a PLC operation the directory holds
// (or that one of the DID's rotation keys signed over its head); activateAccount checks the DID
// document names this server; signPlcOperation keeps the handle rules. Two servers sharing one
// PLC directory (@did-plc/server in-process), driven through @atproto/api.
import { AtpAgent } from '@atproto/api'
import { Secp256k1Keypair } from '@atproto/crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, PASSWORD, startTestPds, type TestPds } from './harness.js'
import { type MailSink } from './mail-sink.js'
import { didForGenesis, opCid, signOp, type SignedPlcOp, type UnsignedPlcOp } from '../src/identity/plc.js'
import { startMovePair, type MovePair } from './move-pair.js'

let plcUrl: string
let sink: MailSink
let origin: TestPds
let dest: TestPds
let n = 0

/** the XRPC error a call ends with, or 'ok' */
async function outcome(p: Promise<unknown>): Promise<string | [number, string, string]> {
  try {
    await p
    return 'ok'
  } catch (err: any) {
    return [err.status, err.error, err.message]
  }
}
const refused = (status: number, error: string, message: RegExp = /./) => [status, error, expect.stringMatching(message)]

const plcGet = async (path: string): Promise<any> => (await fetch(`${plcUrl}/${path}`)).json()
const plcPost = (did: string, op: SignedPlcOp) =>
  fetch(`${plcUrl}/${did}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(op) })

async function originUser(prefix: string) {
  const agent = new AtpAgent({ service: origin.url })
  const handle = `${prefix}${++n}.test`
  await agent.createAccount({ handle, email: `${prefix}${n}@example.com`, password: PASSWORD })
  return { agent, did: agent.session!.did, handle, email: `${prefix}${n}@example.com` }
}

/** an identity the test controls through its rotation key, registered in the directory */
async function ownIdentity(handle: string) {
  const rotation = await Secp256k1Keypair.create()
  const genesis: UnsignedPlcOp = {
    type: 'plc_operation',
    rotationKeys: [rotation.did()],
    verificationMethods: { atproto: (await Secp256k1Keypair.create()).did() },
    alsoKnownAs: [`at://${handle}`],
    services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://old.example.com' } },
    prev: null,
  }
  const g = await signOp(genesis, rotation)
  const did = didForGenesis(g)
  expect((await plcPost(did, g)).status).toBe(200)
  return { did, rotation, genesis, head: g }
}

/** the operation that moves `did` to dest with `signingKey`, over `prev` */
const moveOp = async (base: UnsignedPlcOp, prev: SignedPlcOp, signingKey: string): Promise<UnsignedPlcOp> => ({
  ...base,
  verificationMethods: { atproto: `did:key:${signingKey}` },
  services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.env.PDS_PUBLIC_URL } },
  prev: await opCid(prev),
})

describe('hosting a DID that moves in', () => {
  let pair: MovePair | undefined
  beforeAll(async () => {
    pair = await startMovePair()
    ;({ plcUrl, sink, origin, dest } = pair)
  })
  afterAll(async () => {
    await pair?.stop()
  })

  it("refuses a stranger's DID claimed with a forged operation: nothing is hosted", async () => {
    const victim = await originUser('victim')
    const attacker = new AtpAgent({ service: dest.url })
    const { data } = await attacker.com.atproto.server.reserveSigningKey({ did: victim.did })
    const head = await plcGet(`${victim.did}/log/last`)
    const forged = { ...(await moveOp(head, head, data.signingKey)), sig: Buffer.alloc(64, 7).toString('base64url') }
    const claim = (plcOp: Record<string, unknown>) =>
      outcome(
        attacker.com.atproto.server.createAccount({
          did: victim.did,
          handle: victim.handle,
          email: 'thief@example.com',
          password: PASSWORD,
          plcOp,
        }),
      )
    expect(await claim(forged)).toEqual(refused(400, 'InvalidRequest', /prove|control/i))
    // signed, but by a key that is not one of the DID's rotation keys
    const own = await Secp256k1Keypair.create()
    const { sig: _sig, ...unsigned } = forged
    expect(await claim(await signOp(unsigned, own))).toEqual(refused(400, 'InvalidRequest', /prove|control/i))
    expect(await dest.services.db.selectFrom('account').select('did').where('did', '=', victim.did).execute()).toEqual([])
    // the directory still sends the DID to its own server, and nobody signs for it here
    expect((await plcGet(victim.did)).service[0].serviceEndpoint).toBe(origin.env.PDS_PUBLIC_URL)
    const signIn = await outcome(attacker.login({ identifier: victim.did, password: PASSWORD }))
    expect(signIn).not.toBe('ok')
  })

  it("accepts an operation one of the DID's rotation keys signed over its head, and submits it", async () => {
    const me = await ownIdentity('rotator.test')
    const agent = new AtpAgent({ service: dest.url })
    const key = (await agent.com.atproto.server.reserveSigningKey({ did: me.did })).data.signingKey
    // over a head that is no longer the head: refused
    const moved = await signOp(
      { ...me.genesis, alsoKnownAs: ['at://rotator.test', 'https://x.example'], prev: await opCid(me.head) },
      me.rotation,
    )
    expect((await plcPost(me.did, moved)).status).toBe(200)
    const stale = await signOp(await moveOp(me.genesis, me.head, key), me.rotation)
    const create = (plcOp: Record<string, unknown>) =>
      outcome(agent.createAccount({ did: me.did, handle: 'rotator.test', email: 'rotator@example.com', password: PASSWORD, plcOp }))
    expect(await create(stale)).toEqual(refused(400, 'InvalidRequest', /prove|control/i))
    // over the head: this server submits it to the directory
    const op = await signOp(await moveOp(me.genesis, moved, key), me.rotation)
    expect(await create(op)).toBe('ok')
    expect(await opCid(await plcGet(`${me.did}/log/last`))).toBe(await opCid(op))
    expect((await plcGet(`${me.did}/data`)).services.atproto_pds.endpoint).toBe(dest.env.PDS_PUBLIC_URL)
    // the document names this server and the key: activation goes through
    expect(await outcome(agent.com.atproto.server.activateAccount())).toBe('ok')
  })

  it('activates a migrated-in account only while its DID document names this server and its key', async () => {
    // the standard migration: created with a service-auth token, activated too early
    const user = await originUser('standard')
    const destDid = (await new AtpAgent({ service: dest.url }).com.atproto.server.describeServer()).data.did
    const { token } = (await user.agent.com.atproto.server.getServiceAuth({ aud: destDid, lxm: 'com.atproto.server.createAccount' })).data
    const agent = new AtpAgent({ service: dest.url })
    await agent.createAccount(
      { did: user.did, handle: user.handle, email: user.email, password: PASSWORD },
      { headers: { authorization: `Bearer ${token}` } },
    )
    expect(await outcome(agent.com.atproto.server.activateAccount())).toEqual(refused(400, 'InvalidRequest', /atproto_pds/))
    // after the PLC operation is submitted, it goes through
    const creds = (await agent.com.atproto.identity.getRecommendedDidCredentials()).data
    const before = sink.received.length
    await user.agent.com.atproto.identity.requestPlcOperationSignature()
    await sink.waitFor(before + 1)
    const { operation } = (await user.agent.com.atproto.identity.signPlcOperation({ token: sink.tokenFor(user.email), ...(creds as any) }))
      .data
    await agent.com.atproto.identity.submitPlcOperation({ operation })
    expect(await outcome(agent.com.atproto.server.activateAccount())).toBe('ok')

    // the document changes behind this server's back (its owner's rotation key): read fresh each time
    const me = await ownIdentity('drifter.test')
    const drifter = new AtpAgent({ service: dest.url })
    const key = (await drifter.com.atproto.server.reserveSigningKey({ did: me.did })).data.signingKey
    const here = await signOp(await moveOp(me.genesis, me.head, key), me.rotation)
    expect((await plcPost(me.did, here)).status).toBe(200)
    await drifter.createAccount({ did: me.did, handle: 'drifter.test', email: 'drifter@example.com', password: PASSWORD, plcOp: here })
    const { sig: _s, ...hereUnsigned } = here
    const otherKey = await signOp(
      { ...hereUnsigned, verificationMethods: { atproto: (await Secp256k1Keypair.create()).did() }, prev: await opCid(here) },
      me.rotation,
    )
    expect((await plcPost(me.did, otherKey)).status).toBe(200)
    expect(await outcome(drifter.com.atproto.server.activateAccount())).toEqual(refused(400, 'InvalidRequest', /signing key/))
    const { sig: _o, ...otherUnsigned } = otherKey
    const back = await signOp(
      { ...otherUnsigned, verificationMethods: { atproto: `did:key:${key}` }, prev: await opCid(otherKey) },
      me.rotation,
    )
    expect((await plcPost(me.did, back)).status).toBe(200)
    expect(await outcome(drifter.com.atproto.server.activateAccount())).toBe('ok')
  })

  it('refuses every plcOp without a PLC directory to prove it against', async () => {
    const alone = await startTestPds({ PDS_HOSTNAME: 'alone.localhost' })
    try {
      const me = await ownIdentity('lonely.test')
      const agent = new AtpAgent({ service: alone.url })
      const key = (await agent.com.atproto.server.reserveSigningKey({ did: me.did })).data.signingKey
      const op = await signOp(
        {
          ...(await moveOp(me.genesis, me.head, key)),
          services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: alone.env.PDS_PUBLIC_URL } },
        },
        me.rotation,
      )
      const res = await outcome(
        agent.createAccount({ did: me.did, handle: 'lonely.test', email: 'lonely@example.com', password: PASSWORD, plcOp: op }),
      )
      expect(res).toEqual(refused(400, 'InvalidRequest', /no PLC directory/))
      expect(await alone.services.db.selectFrom('account').select('did').execute()).toEqual([])
    } finally {
      await alone.stop()
    }
  })

  it('refuses a service-auth token issued for another DID with InvalidRequest', async () => {
    const user = await originUser('issuer')
    const other = await originUser('target')
    const destDid = (await new AtpAgent({ service: dest.url }).com.atproto.server.describeServer()).data.did
    const { token } = (await user.agent.com.atproto.server.getServiceAuth({ aud: destDid, lxm: 'com.atproto.server.createAccount' })).data
    const agent = new AtpAgent({ service: dest.url })
    const res = await outcome(
      agent.createAccount(
        { did: other.did, handle: other.handle, email: other.email, password: PASSWORD },
        { headers: { authorization: `Bearer ${token}` } },
      ),
    )
    expect(res).toEqual(refused(400, 'InvalidRequest'))
  })

  it("signPlcOperation keeps updateHandle's rules for a new handle, and leaves the token unspent", async () => {
    const user = await originUser('renamer')
    const taken = await originUser('taken')
    const before = sink.received.length
    await user.agent.com.atproto.identity.requestPlcOperationSignature()
    await sink.waitFor(before + 1)
    const token = sink.tokenFor(user.email)
    const sign = (handle: string) => outcome(user.agent.com.atproto.identity.signPlcOperation({ token, alsoKnownAs: [`at://${handle}`] }))
    // a handle off the service domains must be proven, and a reserved TLD never can be
    expect(await sign('renamed.elsewhere.example')).toEqual(refused(400, 'InvalidHandle', /TLD/))
    expect(await sign('admin.test')).toEqual(refused(400, 'HandleNotAvailable'))
    expect(await sign('ab.test')).toEqual(refused(400, 'InvalidHandle'))
    expect(await sign(taken.handle)).toEqual(refused(400, 'HandleNotAvailable'))
    expect((await plcGet(`${user.did}/log`)).length).toBe(1)
    expect(await sign('renamed.test')).toBe('ok')
    expect((await user.agent.com.atproto.server.getSession()).data.handle).toBe('renamed.test')
  })
})
