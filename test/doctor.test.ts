// `pds doctor` against a running server, with loopback stand-ins for the PLC directory, a relay
// and an email provider: one line per check, exit 1 when one fails.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { describe, newAccount, startTestPds, type TestPds } from './harness.js'

type StandIn = { url: string; server: Server; hits: { path?: string; body: string }[]; skewMs: number }
async function standIn(): Promise<StandIn> {
  const s: StandIn = { url: '', server: undefined as unknown as Server, hits: [], skewMs: 0 }
  s.server = createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      s.hits.push({ path: req.url, body })
      res.sendDate = false
      res.writeHead(200, { 'content-type': 'application/json', date: new Date(Date.now() + s.skewMs).toUTCString() }).end('{}')
    })
  })
  await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r))
  s.url = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`
  return s
}

const lineOf = (out: string, check: string) => out.split('\n').find((l) => l.split(/\s+/)[1] === check) ?? ''

describe('pds doctor', () => {
  let pds: TestPds
  let plc: StandIn, relay: StandIn, mail: StandIn
  let handle: string
  beforeAll(async () => {
    pds = await startTestPds()
    ;[plc, relay, mail] = await Promise.all([standIn(), standIn(), standIn()])
    handle = (await newAccount(pds.url, 'doc')).handle
  })
  afterAll(async () => {
    for (const s of [plc, relay, mail]) s?.server.close()
    await pds?.stop()
  })

  const env = (extra: Record<string, string> = {}) => ({
    ...pds.env,
    PDS_DID_PLC_URL: plc.url,
    PDS_CRAWLERS: relay.url,
    PDS_EMAIL_BACKEND: 'http-json',
    PDS_EMAIL_HTTP_FLAVOR: 'resend',
    PDS_EMAIL_HTTP_URL: `${mail.url}/emails`,
    PDS_EMAIL_HTTP_TOKEN: 're_test',
    PDS_EMAIL_FROM: 'pds@example.com',
    ...extra,
  })

  it('passes every check on a healthy setup and sends a test message when asked', async () => {
    const r = await runCli(env(), 'doctor', '--send-test-email', 'operator@example.com')
    for (const check of ['public-url', 'did-document', 'handle', 'plc-directory', 'relay', 'email', 'clock']) {
      expect(lineOf(r.out, check), `${check}\n${r.out}`).toMatch(/^ok /)
    }
    expect(lineOf(r.out, 'handle')).toContain(handle)
    expect(lineOf(r.out, 'disk')).toMatch(/^(ok|warn) /)
    expect(r.code, r.out + r.err).toBe(0)
    expect(mail.hits).toHaveLength(1)
    expect(JSON.parse(mail.hits[0].body).to).toEqual(['operator@example.com'])
    expect(plc.hits.map((h) => h.path)).toContain('/_health')

    const json = await runCli(env(), 'doctor', '--json')
    expect(json.code).toBe(0)
    expect(JSON.parse(json.out)).toContainEqual(expect.objectContaining({ check: 'email', level: 'ok' }))
    expect(mail.hits).toHaveLength(1)
  })

  it('fails on an unreachable public URL, relay and provider, and on a skewed clock', async () => {
    // nothing listens on port 1 (a free port from the OS could be taken by a parallel suite)
    const closed = 'http://127.0.0.1:1'
    plc.skewMs = 10 * 60_000
    try {
      const r = await runCli(
        env({ PDS_PUBLIC_URL: closed, PDS_CRAWLERS: closed, PDS_EMAIL_HTTP_URL: `${closed}/emails` }),
        'doctor',
        '--send-test-email',
        'operator@example.com',
      )
      expect(r.code).toBe(1)
      expect(lineOf(r.out, 'public-url')).toMatch(/^fail .*unreachable/)
      expect(lineOf(r.out, 'relay')).toMatch(/^fail /)
      expect(lineOf(r.out, 'email')).toMatch(/^fail /)
      expect(lineOf(r.out, 'clock')).toMatch(/^fail .*\b(599|600|601) s behind/)
      expect(lineOf(r.out, 'plc-directory')).toMatch(/^ok /)
      // one line per check
      expect(
        r.out
          .trim()
          .split('\n')
          .every((l) => /^(ok|warn|fail) /.test(l)),
      ).toBe(true)
    } finally {
      plc.skewMs = 0
    }
  })
})
