// The operator CLI as an operator runs it (`node dist/cli/index.js`, built by `make test`), against the
// store of a running server.
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { describe, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
const cli = (...args: string[]) => runCli(pds.env, ...args)
async function json(...args: string[]) {
  const r = await cli(...args, '--json')
  expect(r.code, r.err).toBe(0)
  return JSON.parse(r.out)
}
const fields = (out: string) =>
  Object.fromEntries(
    out
      .trim()
      .split('\n')
      .map((l) => l.split(': ')),
  )
const login = (identifier: string, password: string) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password } })

describe('operator CLI', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
  })
  afterAll(() => pds?.stop())

  it('creates, lists, shows, takes down, restores and deletes accounts', async () => {
    const created = await cli('account', 'create', '--handle', 'cli-user.test', '--email', 'cli@example.com')
    expect(created.code, created.err).toBe(0)
    const { did, handle, password } = fields(created.out)
    expect(did).toMatch(/^did:plc:/)
    expect(handle).toBe('cli-user.test')
    expect((await login(handle, password)).status).toBe(200)

    const listed = await json('account', 'list')
    expect(listed).toContainEqual(expect.objectContaining({ did, handle, email: 'cli@example.com', status: 'active' }))
    const info = await json('account', 'info', handle)
    expect(info).toMatchObject({ did, handle, status: 'active', emailConfirmed: false, records: 0 })
    expect(info.repoRev).toEqual(expect.any(String))

    const down = await cli('account', 'takedown', handle, '--ref', 'ticket-9')
    expect(down.code, down.err).toBe(0)
    const refused = await login(handle, password)
    expect([refused.status, refused.body.error]).toEqual([401, 'AccountTakedown'])
    expect((await json('account', 'info', did)).takedownRef).toBe('ticket-9')
    expect((await cli('account', 'untakedown', did)).code).toBe(0)
    expect((await login(handle, password)).status).toBe(200)

    expect(await json('account', 'delete', 'cli@example.com')).toEqual({ did, status: 'deleted' })
    const gone = await login(handle, password)
    expect(gone.status).toBe(401)
  }, 60_000)

  it('changes handle and email, and resets passwords both ways', async () => {
    const { did, password } = await json('account', 'create', '--handle', 'renamed1.test', '--email', 'r1@example.com')
    expect(await json('account', 'update-handle', did, 'renamed2.test')).toEqual({ did, handle: 'renamed2.test' })
    const resolved = await xrpc(pds.url, 'com.atproto.identity.resolveHandle', { params: { handle: 'renamed2.test' } })
    expect(resolved.body).toEqual({ did })
    expect((await login('renamed2.test', password)).status).toBe(200)
    await json('account', 'create', '--handle', 'holder1.test', '--email', 'holder1@example.com')
    const taken = await cli('account', 'update-handle', did, 'holder1.test')
    expect(taken.code).toBe(1)
    expect(taken.err).toMatch(/HandleNotAvailable/)

    expect(await json('account', 'update-email', did, 'R2@Example.com')).toEqual({ did, email: 'r2@example.com' })
    expect((await login('r2@example.com', password)).status).toBe(200)

    const set = await cli('account', 'reset-password', did, '--password', 'set by the operator')
    expect(set.code, set.err).toBe(0)
    expect((await login(did, 'set by the operator')).status).toBe(200)
    const generated = await json('account', 'reset-password', did)
    expect((await login(did, generated.password)).status).toBe(200)

    // the console email backend: the reset code is printed for the operator to pass on
    const { token } = await json('account', 'reset-password', did, '--email')
    expect(token).toMatch(/^[A-Z2-7]{32}$/)
    const res = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'chosen by cli user' } })
    expect(res.status).toBe(200)
    expect((await login(did, 'chosen by cli user')).status).toBe(200)
  }, 60_000)

  it('creates, lists and disables invite codes that sign-up honours', async () => {
    const codes: string[] = await json('invite', 'create', '--uses', '1', '--count', '2')
    expect(codes).toHaveLength(2)
    const signUp = (n: number, inviteCode: string) =>
      xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: `invited${n}.test`, email: `invited${n}@example.com`, password: 'long enough pw', inviteCode },
      })
    expect((await signUp(1, codes[0])).status).toBe(200)
    const listed = await json('invite', 'list')
    const first = listed.find((v: { code: string }) => v.code === codes[0])
    expect(first.uses).toHaveLength(1)
    expect((await cli('invite', 'list')).out).toContain(`${codes[1]}  1/1 left`)
    expect(await json('invite', 'disable', codes[1])).toEqual({ disabled: 1 })
    const refused = await signUp(2, codes[1])
    expect([refused.status, refused.body.error]).toEqual([400, 'InvalidInviteCode'])
  })

  it('reports status and asks relays to crawl', async () => {
    const asked: { url?: string; body: string }[] = []
    const relay: Server = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        asked.push({ url: req.url, body })
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r))
    try {
      const relayUrl = `http://127.0.0.1:${(relay.address() as { port: number }).port}`
      const r = await cli('request-crawl', relayUrl)
      expect(r.code, r.err).toBe(0)
      expect(asked).toEqual([{ url: '/xrpc/com.atproto.sync.requestCrawl', body: JSON.stringify({ hostname: 'localhost' }) }])
      const none = await cli('request-crawl')
      expect([none.code, none.err.trim()]).toEqual([1, 'pds: request-crawl needs a relay URL (or PDS_CRAWLERS)'])
      expect((await json('status')).relays).toEqual({ [relayUrl]: expect.stringMatching(/^ok \d{4}-\d\d-\d\dT/) })

      // a server with PDS_CRAWLERS asks at start; status shows when
      const other = await startTestPds({ PDS_CRAWLERS: relayUrl })
      try {
        for (let i = 0; i < 250 && asked.length < 2; i++) await new Promise((r) => setTimeout(r, 20))
        expect(asked).toHaveLength(2)
        const seen = JSON.parse((await runCli(other.env, 'status', '--json')).out)
        expect(seen.relays).toEqual({ [relayUrl]: expect.stringMatching(/^ok \d{4}-\d\d-\d\dT/) })
      } finally {
        await other.stop()
      }
    } finally {
      relay.close()
    }

    const status = await json('status')
    expect(status.version).toMatch(/^\d+\.\d+\.\d+/)
    expect(status.accounts.active).toBeGreaterThanOrEqual(2)
    expect(status.accounts.deleted).toBeGreaterThanOrEqual(1)
    expect(status.repos).toBeGreaterThanOrEqual(3)
    expect(status.lastSeq).toBeGreaterThan(0)
    expect(Date.parse(status.lastEventAt)).toBeGreaterThan(Date.now() - 120_000)
    expect(status.freeBytes).toBeGreaterThan(0)
  }, 60_000)

  it('answers --help for every command and mistakes with one line and exit 1', async () => {
    for (const args of [
      ['account', 'list'],
      ['account', 'info'],
      ['account', 'create'],
      ['account', 'delete'],
      ['account', 'takedown'],
      ['account', 'untakedown'],
      ['account', 'update-handle'],
      ['account', 'update-email'],
      ['account', 'reset-password'],
      ['invite', 'create'],
      ['invite', 'list'],
      ['invite', 'disable'],
      ['request-crawl'],
      ['status'],
      ['backup'],
      ['restore'],
      ['doctor'],
    ]) {
      const r = await cli(...args, '--help')
      expect(r.code, args.join(' ')).toBe(0)
      expect(r.out).toMatch(new RegExp(`^usage: pds ${args.join(' ')}`))
    }
    const unknown = await cli('account', 'takedown', 'nobody.test')
    expect(unknown.code).toBe(1)
    expect(unknown.err.trim()).toBe('pds: no account nobody.test')
    const bad = await cli('frobnicate')
    expect(bad.code).toBe(1)
    expect(bad.err).toMatch(/^pds: unknown command frobnicate/)
    const badOption = await cli('account', 'list', '--frob')
    expect(badOption.code).toBe(1)
    expect(badOption.err.trim().split('\n')).toHaveLength(1)
  }, 120_000)
})
