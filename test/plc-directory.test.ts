// PDS_DID_PLC_URL mode against a real PLC directory: @did-plc/server in-process with its in-memory
// database, which verifies every operation's signature and chain.
import { AtpAgent } from '@atproto/api'
import { verifyRepoCar } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createRequire } from 'node:module'
import { describe, startTestPds, xrpc, type TestPds } from './harness.js'

// CommonJS, loaded as Node loads it
const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
let plc: any
let plcUrl: string
let pds: TestPds

describe('PLC directory mode', () => {
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    const server = await plc.start()
    plcUrl = `http://127.0.0.1:${server.address().port}`
    pds = await startTestPds({ PDS_DID_PLC_URL: plcUrl })
  })
  afterAll(async () => {
    await pds?.stop()
    await plc?.destroy()
  })

  it('publishes the genesis operation, so the directory serves the DID document', async () => {
    const agent = new AtpAgent({ service: pds.url })
    await agent.createAccount({ handle: 'plcuser.test', email: 'plc@example.com', password: 'correct horse battery' })
    const did = agent.session!.did
    const res = await fetch(`${plcUrl}/${did}`)
    expect(res.status).toBe(200)
    const doc: any = await res.json()
    expect(doc.id).toBe(did)
    expect(doc.alsoKnownAs).toEqual(['at://plcuser.test'])
    expect(doc.service[0].serviceEndpoint).toBe(pds.env.PDS_PUBLIC_URL)

    // resolveDid reads the directory; the exported repo verifies against the key it names
    const resolved = (await agent.com.atproto.identity.resolveDid({ did })).data.didDoc as any
    expect(resolved.id).toBe(did)
    await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.thing', record: { a: 1 } })
    const car = new Uint8Array(await (await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)).arrayBuffer())
    // the directory's own view of the keys (this release renders documents in the older key format)
    const data: any = await (await fetch(`${plcUrl}/${did}/data`)).json()
    const key = data.verificationMethods.atproto
    expect(resolved.verificationMethod).toHaveLength(1)
    expect((await verifyRepoCar(car, did, key)).creates).toHaveLength(1)
  })

  it('publishes the handle update as a chained operation', async () => {
    const agent = new AtpAgent({ service: pds.url })
    await agent.createAccount({ handle: 'plcmove.test', email: 'plcmove@example.com', password: 'correct horse battery' })
    const did = agent.session!.did
    await agent.com.atproto.identity.updateHandle({ handle: 'plcmoved.test' })
    const log: any = await (await fetch(`${plcUrl}/${did}/log`)).json()
    expect(log).toHaveLength(2)
    expect(log[1].alsoKnownAs).toEqual(['at://plcmoved.test'])
    const doc: any = await (await fetch(`${plcUrl}/${did}`)).json()
    expect(doc.alsoKnownAs).toEqual(['at://plcmoved.test'])
  })

  it('fails createAccount cleanly when the directory refuses, leaving nothing behind', async () => {
    // a directory that refuses everything
    const { createServer } = await import('node:http')
    const refusing = createServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ message: 'Invalid signature on op' }))
    })
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()))
    const other = await startTestPds({ PDS_DID_PLC_URL: `http://127.0.0.1:${(refusing.address() as any).port}` })
    try {
      const res = await xrpc(other.url, 'com.atproto.server.createAccount', {
        body: { handle: 'refused.test', email: 'refused@example.com', password: 'correct horse battery' },
      })
      expect(res.status).toBe(400)
      expect(res.body.message).toContain('PLC directory refused')
      const rows = await other.services.db.selectFrom('account').select('did').execute()
      expect(rows).toEqual([])
      expect(await other.services.db.selectFrom('repo_block').select('cid').execute()).toEqual([])
      // nothing reserved the handle: the same request succeeds against a working directory later
    } finally {
      await other.stop()
      refusing.close()
    }
  })
})
