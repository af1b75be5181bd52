// The memory tuning of the server process (src/runtime.ts): `node dist/bin.js` re-executes itself
// in place with the V8 flags and malloc setting, and gives memory back once it goes quiet.
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { afterEach, expect, it, vi } from 'vitest'
import { loadMallocTrim, reclaimWhenIdle } from '../src/runtime.js'
import { describe, freePort, newAccount, PASSWORD, tempDir, testEnv, xrpc } from './harness.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const children: ChildProcess[] = []

async function serve(extra: Record<string, string> = {}) {
  const port = await freePort()
  const env = await testEnv(port, tempDir(), extra)
  const child = spawn(process.execPath, [BIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' })
  children.push(child)
  let stdout = ''
  child.stdout.on('data', (c) => (stdout += c))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) break
    } catch {}
    if (i > 200) throw new Error('server did not become healthy within 10 s')
    await new Promise((r) => setTimeout(r, 50))
  }
  const proc = (file: string) => readFileSync(`/proc/${child.pid}/${file}`, 'utf8').split('\0')
  const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(proc('status')[0])![1]) * 1024
  return { child, url, exited, out: () => stdout, argv: () => proc('cmdline'), environ: () => proc('environ'), rss }
}

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

describe('the server process memory tuning', () => {
  it('re-executes itself under the same pid with the V8 flags, serves, and stops on SIGTERM', async () => {
    const s = await serve()
    expect(s.argv()).toEqual(expect.arrayContaining(['--max-semi-space-size=4', '--initial-old-space-size=128', '--expose-gc', BIN]))
    const res = await fetch(`${s.url}/xrpc/com.atproto.server.describeServer`)
    expect(res.status).toBe(200)
    s.child.kill('SIGTERM')
    expect(await s.exited).toBe(0)
  })

  it('runs as started with PDS_RUNTIME_TUNING=false', async () => {
    const s = await serve({ PDS_RUNTIME_TUNING: 'false' })
    expect(s.argv()).not.toContain('--expose-gc')
  })

  it("leaves the operator's own flag and malloc setting alone", async () => {
    const s = await serve({ NODE_OPTIONS: '--max-semi-space-size=8', MALLOC_ARENA_MAX: '4', GLIBC_TUNABLES: 'glibc.malloc.tcache_count=0' })
    expect(s.argv()).not.toContain('--max-semi-space-size=4')
    expect(s.argv()).toContain('--expose-gc')
    expect(s.environ()).toContain('MALLOC_ARENA_MAX=4')
    expect(s.environ()).toContain('GLIBC_TUNABLES=glibc.malloc.tcache_count=0')
  })

  it('gives memory back once it goes quiet after start-up', async () => {
    const s = await serve({ PDS_LOG_LEVEL: 'debug' })
    await vi.waitFor(() => expect(s.out()).toContain('idle: memory reclaimed'), { timeout: 10_000, interval: 100 })
  })

  it("gives back the password hashes' memory once logins stop", async () => {
    const s = await serve({ PDS_LOG_LEVEL: 'debug' })
    await vi.waitFor(() => expect(s.out()).toContain('idle: memory reclaimed'), { timeout: 10_000, interval: 100 })
    const { handle } = await newAccount(s.url, 'trim')
    // four at a time: each of libuv's threads runs scrypt and keeps its 16 MiB in its own arena
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        for (let i = 0; i < 8; i++) {
          const res = await xrpc(s.url, 'com.atproto.server.createSession', { body: { identifier: handle, password: PASSWORD } })
          expect(res.status).toBe(200)
        }
      }),
    )
    const loaded = s.rss()
    const reclaims = () =>
      s
        .out()
        .split('\n')
        .filter((l) => l.includes('idle: memory reclaimed')).length
    const before = reclaims()
    await vi.waitFor(() => expect(reclaims()).toBeGreaterThan(before), { timeout: 15_000, interval: 100 })
    // a collection alone gives back V8's heap but not glibc's arenas
    expect(s.rss()).toBeLessThan(loaded - 32 * 2 ** 20)
  })
})

describe('reclaimWhenIdle', () => {
  const saved = globalThis.gc
  afterEach(() => {
    globalThis.gc = saved
  })

  it('collects once per quiet spell, and again only after resident memory grew', async () => {
    const calls: unknown[] = []
    globalThis.gc = ((opts: unknown) => void calls.push(opts)) as typeof gc
    // every sample counts as quiet here; the growth needed is more than this test allocates
    const stop = reclaimWhenIdle(undefined, { checkMs: 10, quietChecks: 2, quietCpu: Infinity, minGrowthBytes: 2 ** 40, atStart: false })
    await new Promise((r) => setTimeout(r, 200))
    stop()
    expect(calls).toEqual([{ type: 'major', execution: 'sync', flavor: 'last-resort' }])
  })

  it('collects at the first check when started, not before it, then only after resident memory grew', async () => {
    const calls: unknown[] = []
    globalThis.gc = ((opts: unknown) => void calls.push(opts)) as typeof gc
    const stop = reclaimWhenIdle(undefined, { checkMs: 10, quietChecks: 2, quietCpu: Infinity, minGrowthBytes: 2 ** 40 })
    // the start-up collection is a pause: requests arriving right after the start come first
    expect(calls).toHaveLength(0)
    await new Promise((r) => setTimeout(r, 200))
    stop()
    expect(calls).toHaveLength(1)
  })

  it('collects after start-up even when the process is never quiet, by the third check', async () => {
    const calls: unknown[] = []
    globalThis.gc = ((opts: unknown) => void calls.push(opts)) as typeof gc
    // no sample counts as quiet: only the start-up collection may run
    const stop = reclaimWhenIdle(undefined, { checkMs: 10, quietCpu: -1 })
    await new Promise((r) => setTimeout(r, 15))
    expect(calls).toHaveLength(0)
    await new Promise((r) => setTimeout(r, 200))
    stop()
    expect(calls).toHaveLength(1)
  })

  it('trims the C heap after each collection', async () => {
    const order: string[] = []
    globalThis.gc = (() => void order.push('gc')) as typeof gc
    const stop = reclaimWhenIdle(undefined, { checkMs: 10, quietCpu: Infinity, trim: () => (order.push('trim'), true) })
    await new Promise((r) => setTimeout(r, 50))
    stop()
    expect(order.slice(0, 2)).toEqual(['gc', 'trim'])
  })

  it('loads the malloc_trim addon that `make build` compiles, and not a missing one', () => {
    const trim = loadMallocTrim()
    expect(trim).toBeTypeOf('function')
    expect(trim!()).toBeTypeOf('boolean')
    expect(loadMallocTrim('/nonexistent/malloc_trim.node')).toBeNull()
  })

  it('does nothing without an exposed gc', async () => {
    globalThis.gc = undefined
    const stop = reclaimWhenIdle(
      () => {
        throw new Error('reclaimed without gc')
      },
      { checkMs: 10, quietCpu: Infinity },
    )
    await new Promise((r) => setTimeout(r, 50))
    stop()
  })
})
