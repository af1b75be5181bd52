// Handles as the network knows them, driven through @atproto/api: a handle on the user's own
// domain proven by a DNS TXT record (a real DNS server on loopback, dns2) or by
// https://<handle>/.well-known/atproto-did (a real TLS server on port 443 of a random loopback
// address, with a certificate made here that this test process trusts through
// tls.setDefaultCACertificates, so the server's own code path is the production one); resolveHandle
// for any handle; a deleted account's handle taken again; reserved names; lower case everywhere.
// Two servers share one PLC directory (@did-plc/server in-process) so a DID can move with its handle.
import { execFileSync } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { get } from 'node:http'
import { createServer, type Server } from 'node:https'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import tls from 'node:tls'
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, describe, PASSWORD, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { startNameserver, type Nameserver } from './tripwire.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

// a real top-level domain, answered only by the loopback DNS server below
const DOMAIN = 'pdstest.net'
const HOST = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(2, 255)}`

let plc: any
let plcUrl: string
let sink: MailSink
let dns: Nameserver
let https: Server
let origin: TestPds
let dest: TestPds
let httpsRequests = 0
let n = 0
const defaultCAs = tls.getCACertificates('default')
/** `_atproto.<handle>` → TXT strings */
const txt: Record<string, string[]> = {}
/** handle → what its well-known file answers */
const wellKnown: Record<string, string> = {}
/** handle → A record (every custom handle points at the loopback TLS server) */
const addresses: Record<string, string> = {}

/** a fresh name under DOMAIN as given (case kept), pointed at the TLS server */
const custom = (label: string) => {
  const handle = `${label}${++n}.${DOMAIN}`
  addresses[handle.toLowerCase()] = HOST
  return handle
}

/** the XRPC error a call ends with, or 'ok' */
async function outcome(p: Promise<unknown>): Promise<string | [number, string]> {
  try {
    await p
    return 'ok'
  } catch (err: any) {
    return [err.status, err.error]
  }
}

async function user(pds: TestPds, prefix: string) {
  const agent = new AtpAgent({ service: pds.url })
  const k = ++n
  const res = await agent.createAccount({ handle: `${prefix}${k}.test`, email: `${prefix}${k}@example.com`, password: PASSWORD })
  return { agent, did: res.data.did, email: `${prefix}${k}@example.com` }
}

const resolve = (pds: TestPds, handle: string) => outcome(new AtpAgent({ service: pds.url }).resolveHandle({ handle }))
const resolved = async (pds: TestPds, handle: string) => (await new AtpAgent({ service: pds.url }).resolveHandle({ handle })).data.did
const docHandle = async (did: string) => (((await (await fetch(`${plcUrl}/${did}`)).json()) as any).alsoKnownAs as string[])[0]

describe('handles', () => {
  beforeAll(async () => {
    const dir = tempDir('pds-tls-')
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        `/CN=${DOMAIN}`,
        '-addext',
        `subjectAltName=DNS:*.${DOMAIN}`,
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    )
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8')
    tls.setDefaultCACertificates([...defaultCAs, cert])
    https = createServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
      httpsRequests++
      const host = (req.headers.host ?? '').toLowerCase()
      const did = wellKnown[host]
      if (req.url === '/.well-known/atproto-did' && did) res.writeHead(200, { 'content-type': 'text/plain' }).end(`${did}\n`)
      else res.writeHead(404).end()
    })
    await new Promise<void>((ok) => https.listen(443, HOST, ok))
    dns = await startNameserver(addresses, txt)
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    sink = await startMailSink()
    const env = { PDS_DID_PLC_URL: plcUrl, PDS_DNS_NAMESERVERS: dns.address, PDS_RESERVED_HANDLES: 'Ops,billing', ...sinkEnv(sink) }
    origin = await startTestPds(env)
    dest = await startTestPds({ ...env, PDS_HOSTNAME: 'pds2.localhost' })
  })
  afterAll(async () => {
    await origin?.stop()
    await dest?.stop()
    await sink?.close()
    await plc?.destroy()
    await dns?.close()
    https?.closeAllConnections()
    await new Promise((ok) => (https ? https.close(ok) : ok(undefined)))
    tls.setDefaultCACertificates(defaultCAs)
  })

  it('updateHandle takes a domain whose DNS TXT record names the account', async () => {
    const { agent, did } = await user(origin, 'dns')
    const handle = custom('Alice')
    txt[`_atproto.${handle.toLowerCase()}`] = [`did=${did}`]
    await agent.com.atproto.identity.updateHandle({ handle })
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe(handle.toLowerCase())
    expect(await docHandle(did)).toBe(`at://${handle.toLowerCase()}`)
    expect(await resolved(origin, handle.toUpperCase())).toBe(did)
  })

  it('updateHandle takes a domain whose https well-known file names the account', async () => {
    const { agent, did } = await user(origin, 'web')
    const handle = custom('bob')
    wellKnown[handle] = did
    const before = httpsRequests
    await agent.com.atproto.identity.updateHandle({ handle })
    expect(httpsRequests).toBeGreaterThan(before)
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe(handle)
    expect(await docHandle(did)).toBe(`at://${handle}`)
  })

  it('refuses a domain whose record names another DID, or nothing, and keeps the old handle', async () => {
    const { agent, did } = await user(origin, 'thief')
    const other = await user(origin, 'victim')
    const named = custom('taken')
    txt[`_atproto.${named}`] = [`did=${other.did}`]
    expect(await outcome(agent.com.atproto.identity.updateHandle({ handle: named }))).toEqual([400, 'InvalidHandle'])
    const web = custom('takenweb')
    wellKnown[web] = other.did
    expect(await outcome(agent.com.atproto.identity.updateHandle({ handle: web }))).toEqual([400, 'InvalidHandle'])
    expect(await outcome(agent.com.atproto.identity.updateHandle({ handle: custom('nothing') }))).toEqual([400, 'InvalidHandle'])
    const session = (await agent.com.atproto.server.getSession()).data
    expect(session.handle).toMatch(/^thief\d+\.test$/)
    expect(await docHandle(did)).toBe(`at://${session.handle}`)
  })

  it('createAccount takes a custom handle for a DID moving in, proven by DNS or https, and refuses one for a new DID', async () => {
    const fresh = custom('fresh')
    txt[`_atproto.${fresh}`] = ['did=did:plc:aaaaaaaaaaaaaaaaaaaaaaaa']
    expect(
      await outcome(new AtpAgent({ service: origin.url }).createAccount({ handle: fresh, email: 'fresh@example.com', password: PASSWORD })),
    ).toEqual([400, 'UnsupportedDomain'])

    const destDid = (await new AtpAgent({ service: dest.url }).com.atproto.server.describeServer()).data.did
    for (const method of ['dns', 'https', 'wrong'] as const) {
      const mover = await user(origin, `mover${method}`)
      const handle = custom(`moved${method}`)
      if (method === 'dns') txt[`_atproto.${handle}`] = [`did=${mover.did}`]
      if (method === 'https') wellKnown[handle] = mover.did
      if (method === 'wrong') txt[`_atproto.${handle}`] = [`did=${(await user(origin, 'bystander')).did}`]
      const { token } = (await mover.agent.com.atproto.server.getServiceAuth({ aud: destDid, lxm: 'com.atproto.server.createAccount' }))
        .data
      const created = new AtpAgent({ service: dest.url }).createAccount(
        { did: mover.did, handle, email: mover.email, password: PASSWORD },
        { headers: { authorization: `Bearer ${token}` } },
      )
      if (method === 'wrong') {
        expect(await outcome(created)).toEqual([400, 'InvalidHandle'])
        continue
      }
      expect((await created).data).toMatchObject({ did: mover.did, handle })
      expect(await resolved(dest, handle)).toBe(mover.did)
    }
  })

  it('resolveHandle answers for handles here, on DNS and on https, and HandleNotFound otherwise', async () => {
    const local = await user(origin, 'Local')
    const session = (await local.agent.com.atproto.server.getSession()).data
    expect(await resolved(origin, session.handle.toUpperCase())).toBe(local.did)

    const viaDns = custom('elsewhere')
    txt[`_atproto.${viaDns}`] = ['did=did:plc:bbbbbbbbbbbbbbbbbbbbbbbb']
    expect(await resolved(origin, viaDns)).toBe('did:plc:bbbbbbbbbbbbbbbbbbbbbbbb')
    // kept for a while: a changed record is not seen at once
    txt[`_atproto.${viaDns}`] = ['did=did:plc:eeeeeeeeeeeeeeeeeeeeeeee']
    expect(await resolved(origin, viaDns)).toBe('did:plc:bbbbbbbbbbbbbbbbbbbbbbbb')
    const viaHttps = custom('website')
    wellKnown[viaHttps] = 'did:web:website.example.com'
    expect(await resolved(origin, viaHttps)).toBe('did:web:website.example.com')

    expect(await resolve(origin, custom('nobody'))).toEqual([400, 'HandleNotFound'])
    // a handle on this server's own domain is this server's to answer
    expect(await resolve(origin, 'nobody-here.test')).toEqual([400, 'HandleNotFound'])
    // two different DIDs in DNS are no answer
    const torn = custom('torn')
    txt[`_atproto.${torn}`] = ['did=did:plc:cccccccccccccccccccccccc', 'did=did:plc:dddddddddddddddddddddddd']
    expect(await resolve(origin, torn)).toEqual([400, 'HandleNotFound'])
  })

  it("gives a deleted account's handle to the next account that asks", async () => {
    const first = await user(origin, 'reuse')
    const handle = (await first.agent.com.atproto.server.getSession()).data.handle
    const del = await xrpc(origin.url, 'com.atproto.admin.deleteAccount', {
      body: { did: first.did },
      headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` },
    })
    expect(del.status).toBe(200)
    expect(await resolve(origin, handle)).toEqual([400, 'HandleNotFound'])

    const second = new AtpAgent({ service: origin.url })
    const created = await second.createAccount({ handle, email: 'reuse-again@example.com', password: PASSWORD })
    expect(created.data.did).not.toBe(first.did)
    expect(await resolved(origin, handle)).toBe(created.data.did)
    const login = new AtpAgent({ service: origin.url })
    await login.login({ identifier: handle, password: PASSWORD })
    expect(login.session?.did).toBe(created.data.did)

    // and updateHandle may take one too
    const third = await user(origin, 'reuse')
    const freed = (await third.agent.com.atproto.server.getSession()).data.handle
    await xrpc(origin.url, 'com.atproto.admin.deleteAccount', {
      body: { did: third.did },
      headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` },
    })
    await second.com.atproto.identity.updateHandle({ handle: freed })
    expect(await resolved(origin, freed)).toBe(created.data.did)
  })

  it("keeps reserved names, built in and the operator's own, off the service domain", async () => {
    const agent = new AtpAgent({ service: origin.url })
    for (const label of ['admin', 'Support', 'security', 'ops', 'BILLING']) {
      const res = await outcome(agent.createAccount({ handle: `${label}.test`, email: `${label}-r@example.com`, password: PASSWORD }))
      expect([label, res]).toEqual([label, [400, 'HandleNotAvailable']])
    }
    const { agent: someone } = await user(origin, 'plain')
    expect(await outcome(someone.com.atproto.identity.updateHandle({ handle: 'security.test' }))).toEqual([400, 'HandleNotAvailable'])
    expect(await outcome(someone.com.atproto.identity.updateHandle({ handle: 'ops.test' }))).toEqual([400, 'HandleNotAvailable'])
  })

  it('stores and compares handles in lower case: sign-up, login, updateHandle, signPlcOperation, well-known', async () => {
    const agent = new AtpAgent({ service: origin.url })
    const k = ++n
    const created = await agent.createAccount({ handle: `MiXed${k}.TEST`, email: `mixed${k}@example.com`, password: PASSWORD })
    expect(created.data.handle).toBe(`mixed${k}.test`)
    const login = new AtpAgent({ service: origin.url })
    await login.login({ identifier: `MIXED${k}.test`, password: PASSWORD })
    expect(login.session?.did).toBe(created.data.did)

    await agent.com.atproto.identity.updateHandle({ handle: `ReNamed${k}.Test` })
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe(`renamed${k}.test`)
    // fetch will not send a Host header of its choosing
    const wk = await new Promise<string>((ok, fail) =>
      get(`${origin.url}/.well-known/atproto-did`, { headers: { host: `RENAMED${k}.TEST` } }, (res) => {
        let body = ''
        res.on('data', (d) => (body += d)).on('end', () => ok(body))
      }).on('error', fail),
    )
    expect(wk).toBe(created.data.did)

    const mails = sink.received.length
    await agent.com.atproto.identity.requestPlcOperationSignature()
    await sink.waitFor(mails + 1)
    const token = sink.tokenFor(`mixed${k}@example.com`)
    const { operation } = (await agent.com.atproto.identity.signPlcOperation({ token, alsoKnownAs: [`at://UPPER${k}.test`] })).data
    expect((operation as { alsoKnownAs: string[] }).alsoKnownAs).toEqual([`at://upper${k}.test`])
    expect((await agent.com.atproto.server.getSession()).data.handle).toBe(`upper${k}.test`)
    expect(await docHandle(created.data.did)).toBe(`at://upper${k}.test`)
  })
})
