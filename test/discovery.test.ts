import { request } from 'node:http'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, xrpc, type TestPds } from './harness.js'

describe('discovery endpoints', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds({ PDS_CONTACT_EMAIL_ADDRESS: 'admin@example.com' })
    await pds.services.db
      .insertInto('account')
      .values({
        did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa',
        handle: 'alice.test',
        email: 'alice@example.com',
        email_confirmed_at: null,
        password_hash: null,
        status: 'active',
        migration_state: 'none',
        created_at: new Date().toISOString(),
        status_changed_at: null,
        takedown_ref: null,
        invites_disabled: 0,
      })
      .execute()
  })
  afterAll(() => pds?.stop())

  it('answers _health with the version and where its DIDs live', async () => {
    const res = await fetch(`${pds.url}/xrpc/_health`)
    expect(res.status).toBe(200)
    // a development server without PDS_DID_PLC_URL keeps its DIDs in its own log
    expect(await res.json()).toEqual({ version: '0.1.0', plc: 'local' })
  })

  it('serves the service DID document', async () => {
    const doc: any = await (await fetch(`${pds.url}/.well-known/did.json`)).json()
    expect(doc.id).toBe('did:web:localhost')
    expect(doc['@context']).toContain('https://www.w3.org/ns/did/v1')
    expect(doc.service).toEqual([{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: pds.env.PDS_PUBLIC_URL }])
  })

  it('answers atproto-did for a hosted handle on its own host name', async () => {
    const res = await getWithHost(pds.url, '/.well-known/atproto-did', 'Alice.test')
    expect(res.status).toBe(200)
    expect(res.type).toMatch(/^text\/plain/)
    expect(res.body).toBe('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa')
    const miss = await getWithHost(pds.url, '/.well-known/atproto-did', 'bob.test')
    expect(miss.status).toBe(404)
  })

  it('answers tls-check for this host and hosted handles only (Caddy on-demand TLS)', async () => {
    expect((await fetch(`${pds.url}/tls-check?domain=Alice.test`)).status).toBe(200)
    expect((await fetch(`${pds.url}/tls-check?domain=localhost`)).status).toBe(200)
    expect((await fetch(`${pds.url}/tls-check?domain=bob.test`)).status).toBe(404)
    expect((await fetch(`${pds.url}/tls-check`)).status).toBe(404)
  })

  it('describes the server through the generated client', async () => {
    const { data } = await pds.client().com.atproto.server.describeServer()
    expect(data).toEqual({
      did: 'did:web:localhost',
      availableUserDomains: ['.test'],
      inviteCodeRequired: false,
      phoneVerificationRequired: false,
      blobUploadLimit: 104_857_600,
      links: {},
      contact: { email: 'admin@example.com' },
    })
  })

  it('describes the server over raw HTTP', async () => {
    const res = await xrpc(pds.url, 'com.atproto.server.describeServer')
    expect(res.status).toBe(200)
    expect(res.body.did).toBe('did:web:localhost')
  })

  it('resolves a local handle, case-insensitively', async () => {
    const { data } = await pds.client().com.atproto.identity.resolveHandle({ handle: 'ALICE.test' })
    expect(data.did).toBe('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa')
  })

  it('answers HandleNotFound for an unknown handle', async () => {
    const res = await xrpc(pds.url, 'com.atproto.identity.resolveHandle', { params: { handle: 'nobody.test' } })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('HandleNotFound')
    await expect(pds.client().com.atproto.identity.resolveHandle({ handle: 'nobody.test' })).rejects.toMatchObject({
      error: 'HandleNotFound',
    })
  })

  it('refuses a syntactically invalid handle with InvalidRequest', async () => {
    const res = await xrpc(pds.url, 'com.atproto.identity.resolveHandle', { params: { handle: 'not a handle' } })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('InvalidRequest')
  })

  it('answers 501 MethodNotImplemented for a method it does not serve', async () => {
    const res = await xrpc(pds.url, 'com.example.nothing.here')
    expect(res.status).toBe(501)
    expect(res.body).toEqual({ error: 'MethodNotImplemented', message: expect.any(String) })
  })

  it('refuses the wrong HTTP method with InvalidRequest', async () => {
    const res = await xrpc(pds.url, 'com.atproto.server.describeServer', { method: 'POST', body: {} })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('InvalidRequest')
  })
})

// fetch will not send a Host header of our choosing; node:http will
function getWithHost(base: string, path: string, host: string) {
  return new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    const req = request(base + path, { headers: { host } }, (res) => {
      let body = ''
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }))
    })
    req.on('error', reject)
    req.end()
  })
}
