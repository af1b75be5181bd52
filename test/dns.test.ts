// PDS_DNS_NAMESERVERS for the operator's own endpoints: the PLC directory and the relays are
// named by hosts only a loopback DNS server knows, so the server reaches them only if it resolves
// them there and not through the system's resolver.
import { createRequire } from 'node:module'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, newAccount, startTestPds, type TestPds } from './harness.js'
import { startNameserver, type Nameserver } from './tripwire.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

// names under a reserved top-level domain (RFC 2606): no public resolver answers for them
const PLC_HOST = 'plc.nameserver-only.test'
const RELAY_HOST = 'relay.nameserver-only.test'

let plc: any
let plcPort: number
let relay: Server
let relayPort: number
const crawlRequests: string[] = []
let ns: Nameserver
let pds: TestPds

describe('PDS_DNS_NAMESERVERS', () => {
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcPort = (await plc.start()).address().port
    relay = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        if (req.url?.startsWith('/xrpc/com.atproto.sync.requestCrawl')) crawlRequests.push(JSON.parse(body || '{}').hostname)
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
    relayPort = (relay.address() as AddressInfo).port
    ns = await startNameserver({ [PLC_HOST]: '127.0.0.1', [RELAY_HOST]: '127.0.0.1' })
    pds = await startTestPds({
      PDS_DNS_NAMESERVERS: ns.address,
      PDS_DID_PLC_URL: `http://${PLC_HOST}:${plcPort}`,
      PDS_CRAWLERS: `http://${RELAY_HOST}:${relayPort}`,
    })
  })
  afterAll(async () => {
    await pds?.stop()
    await ns?.close()
    relay?.closeAllConnections()
    await new Promise<void>((resolve) => relay?.close(() => resolve()))
    await plc?.destroy()
  })

  it('reaches the PLC directory by a name only the configured nameserver knows', async () => {
    const acct = await newAccount(pds.url, 'dns')
    // the genesis operation reached the directory: it serves the DID document
    const doc = (await (await fetch(`http://127.0.0.1:${plcPort}/${acct.did}`)).json()) as any
    expect(doc.alsoKnownAs).toEqual([`at://${acct.handle}`])
  })

  it('asks the relays by names only the configured nameserver knows', async () => {
    // the crawl request at start, retried with backoff if the first one was not yet answered
    for (let i = 0; i < 100 && !crawlRequests.length; i++) await new Promise((r) => setTimeout(r, 50))
    expect(crawlRequests).toContain('localhost')
  })
})
