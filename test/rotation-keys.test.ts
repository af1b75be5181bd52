// User-held rotation keys, against a real PLC directory: the owner of a DID puts a rotation key of
// their own above this server's, then removes this server's, directly at the directory. The
// account keeps working; handle changes build on the directory's newest operation, publish
// nothing when the document already names the handle, and answer a clear 400 when this server can
// no longer sign; `pds doctor` names the account.
import { AtpAgent } from '@atproto/api'
import { Secp256k1Keypair } from '@atproto/crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { opCid, signOp, type SignedPlcOp } from '../src/identity/plc.js'
import { runChecks } from '../src/cli/doctor.js'
import { factorsOf } from '../src/account/factors/index.js'
import { serverSignsFor } from '../src/identity/control.js'
import { accountPage } from '../src/web/account/views/page.js'
import { serverInfo } from '../src/web/layout.js'
import { bearer, describe, newAgent, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startPlc, type Plc } from './network-services.js'

let plc: Plc
let pds: TestPds
let agent: AtpAgent
let did: string
let serverKey: Secp256k1Keypair
let userKey: Secp256k1Keypair

const log = async (): Promise<SignedPlcOp[]> => (await fetch(`${plc.url}/${did}/log`)).json() as Promise<SignedPlcOp[]>
const last = async () => (await log()).at(-1)!

/** the next operation at the directory, changed by `change`, signed by `key` */
async function publish(key: Secp256k1Keypair, change: (op: SignedPlcOp) => Partial<SignedPlcOp>) {
  const head = await last()
  const { sig: _sig, ...prev } = head
  const op = await signOp({ ...prev, ...change(head), prev: await opCid(head) }, key)
  const res = await fetch(`${plc.url}/${did}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(op),
  })
  expect(res.status).toBe(200)
}

describe('user-held rotation keys', () => {
  beforeAll(async () => {
    plc = await startPlc()
    pds = await startTestPds({ PDS_DID_PLC_URL: plc.url })
    serverKey = await Secp256k1Keypair.import(pds.env.PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX)
    userKey = await Secp256k1Keypair.create()
    agent = await newAgent(pds.url, 'rotkey')
    did = agent.session!.did
  })
  afterAll(async () => {
    await pds?.stop()
    await plc?.close()
  })

  it('with the owner’s key above the server’s, updateHandle builds on the directory’s newest operation', async () => {
    // as signPlcOperation would give it, submitted by the owner at the directory, not through this server
    await publish(serverKey, (op) => ({ rotationKeys: [userKey.did(), ...op.rotationKeys] }))
    const before = await last()
    await agent.com.atproto.identity.updateHandle({ handle: 'rotkeyfirst.test' })
    const after = await last()
    expect(after.prev).toBe(await opCid(before))
    expect(after.alsoKnownAs).toEqual(['at://rotkeyfirst.test'])
    expect(after.rotationKeys).toEqual([userKey.did(), serverKey.did()])
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe('rotkeyfirst.test')
  })

  it('once the owner removes the server’s key, a handle change the document does not name is a clear 400', async () => {
    await publish(userKey, () => ({ rotationKeys: [userKey.did()] }))
    const ops = (await log()).length
    const res = await xrpc(pds.url, 'com.atproto.identity.updateHandle', {
      body: { handle: 'rotkeyother.test' },
      headers: bearer(agent.session!.accessJwt),
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('InvalidRequest')
    expect(res.body.message).toContain('no longer holds a rotation key')
    expect((await log()).length).toBe(ops)
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe('rotkeyfirst.test')
  })

  it('updateHandle publishes nothing when the owner already put the handle in the document', async () => {
    await publish(userKey, () => ({ alsoKnownAs: ['at://rotkeyown.test'] }))
    const ops = (await log()).length
    await agent.com.atproto.identity.updateHandle({ handle: 'rotkeyown.test' })
    expect((await log()).length).toBe(ops)
    const session = await agent.com.atproto.server.getSession()
    expect(session.data.handle).toBe('rotkeyown.test')
    expect((session.data.didDoc as any).alsoKnownAs).toEqual(['at://rotkeyown.test'])
    const resolved = await agent.com.atproto.identity.resolveHandle({ handle: 'rotkeyown.test' })
    expect(resolved.data.did).toBe(did)
  })

  it('getSession, checkAccountStatus and deactivate/activate keep working', async () => {
    const status = await agent.com.atproto.server.checkAccountStatus()
    expect(status.data.activated).toBe(true)
    expect(status.data.validDid).toBe(true)
    await agent.com.atproto.server.deactivateAccount({})
    await agent.com.atproto.server.activateAccount()
    expect((await agent.com.atproto.server.checkAccountStatus()).data.activated).toBe(true)
    const fresh = new AtpAgent({ service: pds.url })
    await fresh.login({ identifier: 'rotkeyown.test', password: PASSWORD })
    expect(fresh.session!.did).toBe(did)
  })

  it('pds doctor names the account the server no longer controls', async () => {
    const other = await newAgent(pds.url, 'rotkeykept')
    const checks = await runChecks({ config: pds.services.config, db: pds.services.db }, {})
    const control = checks.find((c) => c.check === 'plc-control')!
    expect(control.level).toBe('warn')
    expect(control.detail).toContain('rotkeyown.test')
    expect(control.detail).not.toContain(other.session!.handle)
  })

  it('the account page says this server no longer controls the DID', async () => {
    const { db, config } = pds.services
    expect(await serverSignsFor(db, config.plcUrl, serverKey.did(), did)).toBe(false)
    const other = await newAgent(pds.url, 'rotkeypage')
    expect(await serverSignsFor(db, config.plcUrl, serverKey.did(), other.session!.did)).toBe(true)
    const render = async (didOutOfControl: boolean) =>
      accountPage(
        { server: serverInfo(config), csrf: 'x', flash: {} },
        {
          did,
          handle: 'rotkeyown.test',
          email: null,
          emailConfirmed: false,
          status: 'active',
          apps: [],
          appPasswords: [],
          factors: await factorsOf(db, did),
          passkeys: [],
          handleDomains: ['.test'],
          didOutOfControl,
          pending: { confirm: false, deletion: false },
        },
      ).toString()
    expect(await render(true)).toContain('This server no longer holds a rotation key of your DID')
    expect(await render(false)).not.toContain('no longer holds a rotation key')
  })
})
