// Outgoing requests whose address a caller or someone else's document chose never reach loopback
// or private addresses outside development mode: a tripwire on loopback proves the server never
// connects, and the same requests still work in development mode.
import { createRequire } from 'node:module'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { isPublicAddress } from '../src/net/guard.js'
import { bearer, describe, freePort, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { dpopKey, par, REDIRECT } from './oauth-helpers.js'
import { startNameserver, startTripwire, type Nameserver, type Tripwire } from './tripwire.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

let plc: any
let plcUrl: string
let sink: MailSink
let dns: Nameserver
let wire: Tripwire
let prod: TestPds
let dev: TestPds

// A service on loopback, as a hostile document would name it: its did:web document, an XRPC
// method, OAuth client metadata and a PDS's did.json, each built for the Host it was asked as.
function serve(req: IncomingMessage, res: ServerResponse) {
  const host = req.headers.host!
  const base = `http://${host}`
  const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  if (req.url === '/.well-known/did.json') {
    return json({
      id: `did:web:${encodeURIComponent(host)}`,
      service: [
        { id: '#x', type: 'AnyService', serviceEndpoint: base },
        { id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: base },
      ],
    })
  }
  if (req.url === '/client.json') {
    return json({
      client_id: `${base}/client.json`,
      redirect_uris: [REDIRECT],
      scope: 'atproto',
      dpop_bound_access_tokens: true,
    })
  }
  if (req.url?.startsWith('/xrpc/')) return json({ secret: 'internal' })
  res.writeHead(404).end()
}

const account = (pds: TestPds) => newAccount(pds.url, 'out')

describe('outbound guard', () => {
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    sink = await startMailSink()
    wire = await startTripwire(serve)
    dns = await startNameserver({ 'evil.example': '127.0.0.1', 'meta.evil.example': '127.0.0.1' })
    // the operator's PLC directory and email API are on loopback too: configured, so trusted
    const env = { PDS_DID_PLC_URL: plcUrl, PDS_DNS_NAMESERVERS: dns.address, ...sinkEnv(sink) }
    prod = await startTestPds({ ...env, PDS_DEV_MODE: 'false', PDS_CRAWLERS: '' })
    dev = await startTestPds(env)
  })
  afterAll(async () => {
    await prod?.stop()
    await dev?.stop()
    await wire?.close()
    await dns?.close()
    await sink?.close()
    await plc?.destroy()
  })
  beforeEach(() => wire.reset())

  const proxied = (pds: TestPds, jwt: string, target: string) =>
    xrpc(pds.url, 'com.example.internal.read', { headers: { ...bearer(jwt), 'atproto-proxy': target } })

  it('refuses an atproto-proxy did:web on loopback or a private name without connecting, outside development mode', async () => {
    const { accessJwt } = await account(prod)
    for (const did of [`did:web:127.0.0.1%3A${wire.port}`, `did:web:localhost%3A${wire.port}`, `did:web:evil.example%3A${wire.port}`]) {
      const res = await proxied(prod, accessJwt, `${did}#x`)
      expect([did, res.status, res.body.error]).toEqual([did, 400, 'InvalidRequest'])
      expect(res.text).not.toContain('internal')
    }
    expect(wire.connections).toBe(0)
  })

  it('proxies to the same did:web in development mode, names resolved through PDS_DNS_NAMESERVERS', async () => {
    const { accessJwt } = await account(dev)
    for (const did of [`did:web:127.0.0.1%3A${wire.port}`, `did:web:localhost%3A${wire.port}`]) {
      const res = await proxied(dev, accessJwt, `${did}#x`)
      expect([did, res.status, res.body]).toEqual([did, 200, { secret: 'internal' }])
    }
    expect(wire.requests).toBeGreaterThan(0)
    // a did:web served over https only: the name resolves to loopback through our nameserver,
    // and the TLS attempt reaches the tripwire (which speaks no TLS)
    wire.reset()
    const named = await proxied(dev, accessJwt, `did:web:evil.example%3A${wire.port}#x`)
    expect(named.status).toBe(400)
    expect(wire.connections).toBeGreaterThan(0)
  })

  it("refuses a service entry of the caller's own did:plc that points at loopback, outside development mode", async () => {
    const alice = await account(prod)
    const endpoints = {
      plain: `http://127.0.0.1:${wire.port}`,
      tls: `https://127.0.0.1:${wire.port}`,
      named: `https://evil.example:${wire.port}`,
      v6: `https://[::ffff:127.0.0.1]:${wire.port}`,
    }
    const current: any = await (await fetch(`${plcUrl}/${alice.did}/data`)).json()
    const n = sink.received.length
    expect(
      (await xrpc(prod.url, 'com.atproto.identity.requestPlcOperationSignature', { method: 'POST', headers: bearer(alice.accessJwt) }))
        .status,
    ).toBe(200)
    await sink.waitFor(n + 1)
    const services = { ...current.services }
    for (const [name, endpoint] of Object.entries(endpoints)) services[name] = { type: 'AnyService', endpoint }
    const signed = await xrpc(prod.url, 'com.atproto.identity.signPlcOperation', {
      headers: bearer(alice.accessJwt),
      body: { token: sink.tokenFor(alice.email), services },
    })
    expect(signed.status, signed.text).toBe(200)
    expect(((await (await fetch(`${plcUrl}/${alice.did}/data`)).json()) as any).services.plain.endpoint).toBe(endpoints.plain)
    for (const name of Object.keys(endpoints)) {
      const res = await proxied(prod, alice.accessJwt, `${alice.did}#${name}`)
      expect([name, res.status, res.body.error]).toEqual([name, 502, 'UpstreamFailure'])
      expect(res.text).not.toContain('internal')
    }
    expect(wire.connections).toBe(0)

    // the same document, read by a server in development mode, is followed
    const bob = await account(dev)
    const res = await proxied(dev, bob.accessJwt, `${alice.did}#plain`)
    expect([res.status, res.body]).toEqual([200, { secret: 'internal' }])
    expect(wire.requests).toBe(1)
  })

  it('refuses requestAccountMigrate to loopback and private destinations without connecting, one error for all', async () => {
    const closed = await freePort()
    const { did, accessJwt } = await account(prod)
    const answers = new Set<string>()
    for (const to of [
      `https://127.0.0.1:${wire.port}`,
      `https://localhost:${wire.port}`,
      `https://evil.example:${wire.port}`,
      `https://[::1]:${wire.port}`,
      `https://2130706433:${wire.port}`, // 127.0.0.1 written as one number
      `https://0x7f.0.0.1:${wire.port}`,
      `https://127.0.0.1:${closed}`,
      'https://10.0.0.1',
      'https://169.254.169.254',
    ]) {
      const res = await xrpc(prod.url, 'com.atproto.server.requestAccountMigrate', { headers: bearer(accessJwt), body: { to } })
      expect([to, res.status, res.body.error]).toEqual([to, 400, 'BadDestination'])
      answers.add(res.text)
    }
    expect([...answers]).toHaveLength(1)
    expect(wire.connections).toBe(0)
    const http = await xrpc(prod.url, 'com.atproto.server.requestAccountMigrate', {
      headers: bearer(accessJwt),
      body: { to: `http://127.0.0.1:${wire.port}` },
    })
    expect([http.status, http.body.error]).toEqual([400, 'BadDestination'])
    expect(wire.connections).toBe(0)
    const row = await prod.services.db.selectFrom('account').select('migration_state').where('did', '=', did).executeTakeFirstOrThrow()
    expect(row.migration_state).toBe('none')
  })

  it('answers an open port and a closed one alike in development mode, and migrates to a reachable one', async () => {
    const closed = await freePort()
    const listening = await startTripwire() // answers 404 to everything
    const { accessJwt } = await account(dev)
    const call = (to: string) => xrpc(dev.url, 'com.atproto.server.requestAccountMigrate', { headers: bearer(accessJwt), body: { to } })
    try {
      const open = await call(`http://127.0.0.1:${listening.port}`)
      const shut = await call(`http://127.0.0.1:${closed}`)
      expect([open.status, open.body.error]).toEqual([400, 'BadDestination'])
      expect(listening.requests).toBe(1)
      expect(shut.body).toEqual(open.body)
    } finally {
      await listening.close()
    }
    const ok = await call(`http://localhost:${wire.port}`)
    expect(ok.status, ok.text).toBe(200)
    expect(wire.requests).toBe(1)
  })

  it('refuses OAuth client metadata on loopback or a private name without connecting, outside development mode', async () => {
    for (const clientId of [
      `http://localhost:${wire.port}/client.json`,
      `https://localhost:${wire.port}/client.json`,
      `https://127.0.0.1:${wire.port}/client.json`,
      `https://meta.evil.example:${wire.port}/client.json`,
    ]) {
      const res = await par({ url: prod.url, publicUrl: prod.env.PDS_PUBLIC_URL }, await dpopKey(), { client_id: clientId })
      expect([clientId, res.status, res.json.error]).toEqual([clientId, 400, 'invalid_client'])
    }
    expect(wire.connections).toBe(0)
    const res = await par({ url: dev.url, publicUrl: dev.env.PDS_PUBLIC_URL }, await dpopKey(), {
      client_id: `http://localhost:${wire.port}/client.json`,
      scope: 'atproto',
    })
    expect(res.status, res.text).toBe(201)
    expect(wire.requests).toBe(1)
  })

  it('classifies loopback, private, link-local, unique-local, multicast, IPv4-mapped and -translated and embedded IPv4 addresses', () => {
    const refused = [
      '127.0.0.1',
      '10.1.2.3',
      '172.31.0.1',
      '192.168.0.1',
      '100.64.0.1',
      '100.127.255.255',
      '169.254.169.254',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '198.18.0.1',
      '::',
      '::1',
      'fe80::1',
      'fd00::1',
      'fc00::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:10.0.0.1',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      '64:ff9b::10.0.0.1',
      '2002:a00:1::1',
      '2002:7f00:1::',
      // IPv4-mapped, whatever is inside: no service on the internet has such an address
      '::ffff:0:0',
      '::ffff:8.8.8.8',
      '0:0:0:0:0:ffff:808:808',
      // IPv4-translated (::ffff:0:0:0/96)
      '::ffff:0:7f00:1',
      '::ffff:0:127.0.0.1',
      '::ffff:0:a00:1',
      '::ffff:0:808:808',
      '0:0:0:0:ffff:0:a9fe:a9fe',
      // NAT64 and its local-use prefix with a private address inside
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::192.168.1.1',
      '64:ff9b:1::808:808',
    ]
    for (const a of refused) expect(isPublicAddress(a), a).toBe(false)
    for (const a of ['93.184.216.34', '8.8.8.8', '100.128.0.1', '2606:4700::1111', '64:ff9b::808:808', '2002:808:808::1']) {
      expect(isPublicAddress(a), a).toBe(true)
    }
    expect(isPublicAddress('not an address')).toBe(false)
  })
})
