import { randomBytes } from 'node:crypto'
import { AtpAgent } from '@atproto/api'
import express from 'express'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { ADMIN_PASSWORD, bearer, describe, newAccount, redisUrl, startTestPds, xrpc, type TestPds } from './harness.js'
import { dpopKey, openPage, par, submitPage } from './oauth-helpers.js'

const ON = { PDS_RATE_LIMITS_ENABLED: 'true' }
const login = (pds: TestPds, identifier: string, headers: Record<string, string> = {}) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password: 'wrong-password' }, headers })

async function attempts(n: number, call: () => Promise<{ status: number }>) {
  const statuses: number[] = []
  for (let i = 0; i < n; i++) statuses.push((await call()).status)
  return statuses
}

describe('rate limits', () => {
  const servers: TestPds[] = []
  const start = async (...args: Parameters<typeof startTestPds>) => {
    const s = await startTestPds(...args)
    servers.push(s)
    return s
  }
  afterAll(async () => {
    for (const s of servers) await s.stop()
  })

  it('are on unless turned off', () => {
    expect(
      loadConfig({
        PDS_DATA_DIRECTORY: '/tmp/x',
        PDS_JWT_SECRET: 'x'.repeat(32),
        PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
        PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
      }).rateLimitsEnabled,
    ).toBe(true)
  })

  it('believes X-Forwarded-For from loopback only, unless PDS_TRUST_PROXY names more', () => {
    const trusted = (env: Record<string, string> = {}) => {
      const config = loadConfig({
        PDS_DATA_DIRECTORY: '/tmp/x',
        PDS_JWT_SECRET: 'x'.repeat(32),
        PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
        PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
        ...env,
      })
      // what the server sets: express asks this function whether a hop's address may forward
      const trust = express().set('trust proxy', config.trustProxy).get('trust proxy fn') as (addr: string, i: number) => boolean
      return (addr: string) => trust(addr, 0)
    }
    const byDefault = trusted()
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) expect(byDefault(a), a).toBe(true)
    // behind a bridge network every client could otherwise pick its own address
    for (const a of ['10.0.0.1', '172.17.0.1', '192.168.1.1', 'fd00::1', 'fe80::1', '203.0.113.5']) expect(byDefault(a), a).toBe(false)
    const docker = trusted({ PDS_TRUST_PROXY: 'loopback, 172.16.0.0/12' })
    expect(docker('172.17.0.1')).toBe(true)
    expect(docker('10.0.0.1')).toBe(false)
  })

  describe('with the default budgets', () => {
    let pds: TestPds
    beforeAll(async () => {
      pds = await start(ON)
    })

    it('answers the 31st login attempt within 5 minutes with 429 RateLimitExceeded', async () => {
      const statuses = await attempts(30, () => login(pds, 'victim.test'))
      expect(statuses.every((s) => s === 401)).toBe(true)
      const res = await login(pds, 'victim.test')
      expect(res.status).toBe(429)
      expect(res.body.error).toBe('RateLimitExceeded')
      expect(res.headers.get('ratelimit-limit')).toBe('30')
      expect(res.headers.get('ratelimit-remaining')).toBe('0')
      expect(Number(res.headers.get('ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000)
      expect(res.headers.get('ratelimit-policy')).toBe('30;w=300')
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0)
    })

    it('counts logins per account from every address, so other accounts are not locked out', async () => {
      expect((await login(pds, 'someone-else.test')).status).toBe(401)
      // another client address (behind the trusted local proxy) for the same account: guessing
      // from many addresses gets no more tries
      expect((await login(pds, 'victim.test', { 'x-forwarded-for': '203.0.113.7' })).status).toBe(429)
    })

    it('lets an account start five repository imports an hour', async () => {
      const { accessJwt } = await newAccount(pds.url, 'imp')
      const importRepo = () =>
        xrpc(pds.url, 'com.atproto.repo.importRepo', {
          body: 'not a car',
          headers: { ...bearer(accessJwt), 'content-type': 'application/vnd.ipld.car' },
        })
      expect(await attempts(5, importRepo)).toEqual([400, 400, 400, 400, 400])
      const res = await importRepo()
      expect([res.status, res.body.error]).toEqual([429, 'RateLimitExceeded'])
      expect(res.headers.get('ratelimit-policy')).toBe('5;w=3600')
    })

    it('tells every caller its remaining budget', async () => {
      const res = await xrpc(pds.url, 'com.atproto.server.describeServer')
      expect(res.status).toBe(200)
      expect(res.headers.get('ratelimit-limit')).toBe('3000')
      expect(Number(res.headers.get('ratelimit-remaining'))).toBeLessThan(3000)
    })
  })

  it('lets requests through again once the window has passed', async () => {
    // a window several password hashes long, so a busy machine still makes the third try inside it
    const pds = await start(ON, { rateLimits: { limits: { login: [{ durationMs: 5000, points: 2 }] } } })
    expect(await attempts(2, () => login(pds, 'a.test'))).toEqual([401, 401])
    expect((await login(pds, 'a.test')).status).toBe(429)
    await new Promise((r) => setTimeout(r, 5100))
    expect((await login(pds, 'a.test')).status).toBe(401)
  })

  it('limits every method by the global budget, per account or address', async () => {
    const pds = await start(ON, { rateLimits: { limits: { global: [{ durationMs: 60_000, points: 5 }] } } })
    const statuses = await attempts(6, () => xrpc(pds.url, 'com.atproto.server.describeServer'))
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    // unknown methods too, before anything else happens
    expect((await xrpc(pds.url, 'com.example.nothing')).status).toBe(429)
    expect((await xrpc(pds.url, 'com.atproto.server.describeServer', { headers: { 'x-forwarded-for': '198.51.100.1' } })).status).toBe(200)
  })

  it('charges a create 3 write points, an update 2, a delete 1, and a batch the sum of its operations', async () => {
    const pds = await start(ON, { rateLimits: { limits: { write: [{ durationMs: 60_000, points: 12 }] } } })
    const acct = await newAccount(pds.url, 'wp')
    const call = (nsid: string, body: Record<string, unknown>) =>
      xrpc(pds.url, nsid, { body: { repo: acct.did, ...body }, headers: bearer(acct.accessJwt) })
    const post = { $type: 'app.bsky.feed.post', text: 'hi', createdAt: new Date().toISOString() }
    const create = (rkey: string) => ({ $type: 'com.atproto.repo.applyWrites#create', collection: 'app.bsky.feed.post', rkey, value: post })
    const statuses = [
      (await call('com.atproto.repo.createRecord', { collection: 'app.bsky.feed.post', rkey: 'a1', record: post })).status, // 3
      (await call('com.atproto.repo.putRecord', { collection: 'app.bsky.feed.post', rkey: 'a1', record: post })).status, // 5
      (await call('com.atproto.repo.deleteRecord', { collection: 'app.bsky.feed.post', rkey: 'a1' })).status, // 6
      (await call('com.atproto.repo.applyWrites', { writes: [create('b1'), create('b2')] })).status, // 12: the whole budget
      (await call('com.atproto.repo.deleteRecord', { collection: 'app.bsky.feed.post', rkey: 'b1' })).status, // 13
    ]
    expect(statuses).toEqual([200, 200, 200, 200, 429])
  })

  it('lets operators raise the budgets with PDS_RATE_LIMIT_MULTIPLIER', async () => {
    const pds = await start(
      { ...ON, PDS_RATE_LIMIT_MULTIPLIER: '2' },
      { rateLimits: { limits: { login: [{ durationMs: 60_000, points: 2 }] } } },
    )
    expect(await attempts(5, () => login(pds, 'b.test'))).toEqual([401, 401, 401, 401, 429])
  })

  it('skips every limit for the bypass key and bypass addresses', async () => {
    const key = 'k'.repeat(32)
    const pds = await start(
      { ...ON, PDS_RATE_LIMIT_BYPASS_KEY: key, PDS_RATE_LIMIT_BYPASS_IPS: '192.0.2.9' },
      { rateLimits: { limits: { login: [{ durationMs: 60_000, points: 1 }] } } },
    )
    expect(await attempts(3, () => login(pds, 'c.test', { 'x-ratelimit-bypass': key }))).toEqual([401, 401, 401])
    expect(await attempts(3, () => login(pds, 'c.test', { 'x-forwarded-for': '192.0.2.9' }))).toEqual([401, 401, 401])
    expect(await attempts(2, () => login(pds, 'c.test', { 'x-ratelimit-bypass': 'wrong' }))).toEqual([401, 429])
  })

  it('are all off with PDS_RATE_LIMITS_ENABLED=false', async () => {
    const pds = await start({ PDS_RATE_LIMITS_ENABLED: 'false' })
    const statuses = await attempts(35, () => login(pds, 'd.test'))
    expect(statuses.every((s) => s === 401)).toBe(true)
    const res = await xrpc(pds.url, 'com.atproto.server.describeServer')
    expect(res.headers.get('ratelimit-limit')).toBeNull()
    // wrong admin passwords past the address budget (100) are not counted either
    const admin = (password: string) =>
      xrpc(pds.url, 'com.atproto.admin.getAccountInfos', {
        params: { dids: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' },
        headers: { authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` },
      })
    expect(new Set(await attempts(101, () => admin('guess')))).toEqual(new Set([401]))
    expect((await admin(ADMIN_PASSWORD)).status).toBe(200)
    // 35 password hashes in a row: a busy machine takes longer than the default 30 seconds
  }, 90_000)

  describe('on every password check', () => {
    // small budgets: 3 guesses at one account, 5 from one address
    let pds: TestPds
    const from = (address: string) => ({ 'x-forwarded-for': address })
    beforeAll(async () => {
      pds = await start(ON, {
        rateLimits: { limits: { login: [{ durationMs: 60_000, points: 3 }], loginAddress: [{ durationMs: 60_000, points: 5 }] } },
      })
    })

    it('counts " Victim.TEST " against victim.test, as the lookup trims and lower-cases it', async () => {
      expect(await attempts(3, () => login(pds, 'victim1.test', from('203.0.113.1')))).toEqual([401, 401, 401])
      const agent = new AtpAgent({ service: pds.url })
      agent.setHeader('x-forwarded-for', '203.0.113.1')
      const err = await agent.login({ identifier: ' Victim1.TEST ', password: 'wrong-password' }).catch((e) => e)
      expect([err.status, err.error]).toEqual([429, 'RateLimitExceeded'])
    })

    it('counts one address guessing across many accounts', async () => {
      const names = ['s1', 's2', 's3', 's4', 's5', 's6'].map((n) => `${n}.test`)
      const statuses = []
      for (const name of names) statuses.push((await login(pds, name, from('203.0.113.2'))).status)
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
      // another address is not affected
      expect((await login(pds, 's1.test', from('203.0.113.3'))).status).toBe(401)
    })

    it('limits the OAuth sign-in form with the same budget, on a page that says so', async () => {
      const handle = 'formvictim.test'
      const password = 'the right password'
      const created = await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle, email: 'formvictim@example.com', password },
      })
      expect(created.status, created.text).toBe(200)
      const res = await par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, await dpopKey())
      const requestUri = res.json.request_uri as string
      const page = await openPage(pds.url, requestUri)
      const guess = (pw: string, address: string) =>
        fetch(`${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: page.cookie, ...from(address) },
          body: new URLSearchParams({ handle, password: pw, action: 'allow', csrf_token: page.csrf! }),
        })
      // createSession and the form draw on one budget per account
      expect((await login(pds, handle, from('203.0.113.4'))).status).toBe(401)
      expect((await guess('wrong 1', '203.0.113.5')).status).toBe(401)
      expect((await guess('wrong 2', '203.0.113.6')).status).toBe(401)
      for (const pw of ['wrong 3', password]) {
        const refused = await guess(pw, '203.0.113.7')
        expect(refused.status).toBe(429)
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
        const html = await refused.text()
        expect(html).toContain('Too many sign-in attempts')
        expect(html).toContain('name="password"')
      }
      expect((await login(pds, handle, from('203.0.113.8'))).status).toBe(429)
      // the form still works as before for someone else
      const other = await submitPage(
        pds.url,
        requestUri,
        { handle: 'nobody.test', password: 'x', action: 'allow', csrf_token: page.csrf },
        page.cookie,
      )
      expect(other.status).toBe(401)
    })

    it("counts deleteAccount's password check against the account", async () => {
      const password = 'the right password'
      const created = await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: 'delvictim.test', email: 'delvictim@example.com', password },
      })
      expect(created.status, created.text).toBe(200)
      const { did, accessJwt } = created.body
      const del = (pw: string, address: string) =>
        xrpc(pds.url, 'com.atproto.server.deleteAccount', {
          body: { did, password: pw, token: 'ABCDE-ABCDE' },
          headers: { ...bearer(accessJwt), ...from(address) },
        })
      expect((await del('wrong 1', '203.0.113.9')).status).toBe(401)
      expect((await del('wrong 2', '203.0.113.10')).status).toBe(401)
      expect((await del('wrong 3', '203.0.113.11')).status).toBe(401)
      const res = await del(password, '203.0.113.12')
      expect([res.status, res.body.error]).toEqual([429, 'RateLimitExceeded'])
    })

    it('counts wrong admin passwords against the address; then even the right one waits', async () => {
      const admin = (password: string, address: string) =>
        xrpc(pds.url, 'com.atproto.admin.getAccountInfos', {
          params: { dids: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' },
          headers: { authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}`, ...from(address) },
        })
      expect((await admin(ADMIN_PASSWORD, '203.0.113.13')).status).toBe(200)
      expect(await attempts(5, () => admin('guess', '203.0.113.13'))).toEqual([401, 401, 401, 401, 401])
      const res = await admin(ADMIN_PASSWORD, '203.0.113.13')
      expect([res.status, res.body.error]).toEqual([429, 'RateLimitExceeded'])
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0)
      expect((await admin(ADMIN_PASSWORD, '203.0.113.14')).status).toBe(200)
    })
  })

  describe.skipIf(!redisUrl)('backed by Redis', () => {
    it('shares the counters between processes', async () => {
      const prefix = `test-${randomBytes(6).toString('hex')}`
      const tuning = { rateLimits: { prefix, limits: { login: [{ durationMs: 60_000, points: 3 }] } } }
      const a = await start({ ...ON, PDS_REDIS_URL: redisUrl! }, tuning)
      const b = await start({ ...ON, PDS_REDIS_URL: redisUrl! }, tuning)
      expect(await attempts(2, () => login(a, 'e.test'))).toEqual([401, 401])
      expect(await attempts(2, () => login(b, 'e.test'))).toEqual([401, 429])
      expect((await login(a, 'e.test')).status).toBe(429)
    })
  })
})
