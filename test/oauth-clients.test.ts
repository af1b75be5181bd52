// Discoverable clients: the metadata document is fetched once, validated and cached; http and
// loopback only in development mode (a localhost server); private addresses refused (SSRF).
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { isPublicAddress } from '../src/net/guard.js'
import { describe, OFF_NETWORK, startTestPds, type TestPds } from './harness.js'
import { dpopKey, openPage, par, post, pkce, REDIRECT } from './oauth-helpers.js'

let pds: TestPds
let meta: Server
let metaBase: string
const hits: Record<string, number> = {}
const docs: Record<string, (base: string) => unknown> = {
  '/good.json': (base) => ({
    client_id: `${base}/good.json`,
    client_name: 'Good Example App',
    redirect_uris: [REDIRECT],
    scope: 'atproto transition:generic',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    dpop_bound_access_tokens: true,
    application_type: 'native',
  }),
  '/mismatch.json': (base) => ({ ...(docs['/good.json'](base) as object), client_id: `${base}/other.json` }),
  '/nodpop.json': (base) => ({
    ...(docs['/good.json'](base) as object),
    client_id: `${base}/nodpop.json`,
    dpop_bound_access_tokens: false,
  }),
  '/badredirect.json': (base) => ({
    ...(docs['/good.json'](base) as object),
    client_id: `${base}/badredirect.json`,
    redirect_uris: ['https://elsewhere.example/cb'],
  }),
  '/huge.json': (base) => ({ ...(docs['/good.json'](base) as object), client_id: `${base}/huge.json`, padding: 'x'.repeat(100_000) }),
}

describe('discoverable OAuth clients', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    meta = createServer((req, res) => {
      hits[req.url!] = (hits[req.url!] ?? 0) + 1
      const doc = docs[req.url!]
      if (!doc) return res.writeHead(404).end()
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc(metaBase)))
    })
    await new Promise<void>((resolve) => meta.listen(0, '127.0.0.1', resolve))
    metaBase = `http://localhost:${(meta.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await new Promise((resolve) => meta?.close(resolve))
    await pds?.stop()
  })

  async function parWith(clientId: string) {
    const key = await dpopKey()
    return par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, key, { client_id: clientId })
  }

  it('fetches the metadata document once, and shows its client_name on the sign-in page', async () => {
    const id = `${metaBase}/good.json`
    const first = await parWith(id)
    expect(first.status, first.text).toBe(201)
    const second = await parWith(id)
    expect(second.status).toBe(201)
    expect(hits['/good.json']).toBe(1)
    const page = await openPage(pds.url, first.json.request_uri)
    expect(page.html).toContain('Good Example App')
  })

  it.each([
    ['client_id differs from its URL', '/mismatch.json'],
    ['tokens not DPoP-bound', '/nodpop.json'],
    ['redirect_uri on another host', '/badredirect.json'],
    ['document over the size limit', '/huge.json'],
    ['document missing', '/missing.json'],
  ])('refuses a client whose metadata is bad: %s', async (_name, path) => {
    const res = await parWith(`${metaBase}${path}`)
    expect(res.status).toBe(400)
    expect(res.json.error).toBe('invalid_client')
  })

  it('refuses a redirect_uri the metadata does not list', async () => {
    const key = await dpopKey()
    const res = await par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, key, {
      client_id: `${metaBase}/good.json`,
      redirect_uri: 'http://127.0.0.1:9/not-listed',
    })
    expect(res.status).toBe(400)
  })

  it('refuses http client metadata when the server does not run on localhost', async () => {
    const remote = await startTestPds({ PDS_HOSTNAME: 'pds.example', PDS_PUBLIC_URL: 'https://pds.example', ...OFF_NETWORK })
    try {
      const p = pkce()
      const res = await post(`${remote.url}/oauth/par`, {
        client_id: `${metaBase}/good.json`,
        response_type: 'code',
        redirect_uri: REDIRECT,
        scope: 'atproto',
        state: 's',
        code_challenge: p.challenge,
        code_challenge_method: 'S256',
        dpop_jkt: (await dpopKey()).jkt,
      })
      expect(res.status).toBe(400)
      expect(res.json.error).toBe('invalid_client')
      // nor an https client_id naming a private or loopback address
      const ssrf = await post(`${remote.url}/oauth/par`, { client_id: 'https://127.0.0.1/client.json' })
      expect(ssrf.json.error).toBe('invalid_client')
      const ssrf2 = await post(`${remote.url}/oauth/par`, { client_id: 'https://localhost/client.json' })
      expect(ssrf2.json.error).toBe('invalid_client')
    } finally {
      await remote.stop()
    }
  })

  it('classifies private, link-local and loopback addresses', () => {
    for (const a of [
      '10.1.2.3',
      '192.168.0.1',
      '172.16.5.5',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      'fe80::1',
      'fd00::1',
      '::ffff:10.0.0.1',
      '::',
    ]) {
      expect(isPublicAddress(a), a).toBe(false)
    }
    expect(isPublicAddress('127.0.0.1')).toBe(false)
    expect(isPublicAddress('::1')).toBe(false)
    for (const a of ['93.184.216.34', '2606:4700::1111', '8.8.8.8']) expect(isPublicAddress(a), a).toBe(true)
  })
})
