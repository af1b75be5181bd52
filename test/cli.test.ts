// The operator CLI as an operator runs it (`node dist/cli.js`, built by `make test`), against the
// store of a running server.
import { spawn } from 'node:child_process'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, xrpc, type TestPds } from './harness.js'

const CLI = new URL('../dist/cli.js', import.meta.url).pathname
let pds: TestPds

function cli(...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...pds.env }, stdio: 'pipe' })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out, err })
    })
  })
}
const fields = (out: string) => Object.fromEntries(out.trim().split('\n').map((l) => l.split(': ')))
const login = (identifier: string, password: string) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password } })

describe('operator CLI', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
  })
  afterAll(() => pds?.stop())

  it('creates an account, takes it down, restores it and resets its password', async () => {
    const created = await cli('create-account', '--handle', 'cli-user.test', '--email', 'cli@example.com')
    expect(created.code, created.err).toBe(0)
    const { did, handle, password } = fields(created.out)
    expect(did).toMatch(/^did:plc:/)
    expect(handle).toBe('cli-user.test')
    expect((await login(handle, password)).status).toBe(200)

    const down = await cli('takedown', handle, '--ref', 'ticket-9')
    expect(down.code, down.err).toBe(0)
    const refused = await login(handle, password)
    expect([refused.status, refused.body.error]).toEqual([401, 'AccountTakedown'])
    expect((await cli('restore', did)).code).toBe(0)
    expect((await login(handle, password)).status).toBe(200)

    const reset = await cli('reset-password', 'cli@example.com')
    expect(reset.code, reset.err).toBe(0)
    const token = reset.out.trim()
    expect(token).toMatch(/^[A-Z2-7]{32}$/)
    const res = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'chosen by cli user' } })
    expect(res.status).toBe(200)
    expect((await login(handle, 'chosen by cli user')).status).toBe(200)
  })

  it('creates invite codes that sign-up accepts', async () => {
    const res = await cli('create-invite', '--uses', '1', '--count', '2')
    expect(res.code, res.err).toBe(0)
    const codes = res.out.trim().split('\n')
    expect(codes).toHaveLength(2)
    const signUp = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'invited1.test', email: 'invited1@example.com', password: 'long enough pw', inviteCode: codes[0] },
    })
    expect(signUp.status).toBe(200)
  })

  it('answers mistakes with one line and exit 1', async () => {
    const unknown = await cli('takedown', 'nobody.test')
    expect(unknown.code).toBe(1)
    expect(unknown.err.trim()).toBe('pds: no account nobody.test')
    const bad = await cli('frobnicate')
    expect(bad.code).toBe(1)
    expect(bad.err).toMatch(/^pds: unknown command frobnicate/)
  })
})
