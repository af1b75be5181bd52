// Relay health, with a relay stand-in on loopback that implements requestCrawl and
// getHostStatus: sequence numbers never go backwards (PDS_SEQ_FLOOR, `pds restore` of an older
// backup), the relays are asked to crawl again after a restart and after writes nobody was
// subscribed to read, and `pds doctor` reports each relay's view of this host and what to do.
import { join } from 'node:path'
import { rmSync } from 'node:fs'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { subscribe, seqs } from './firehose-client.js'
import { describe, dialect, newAccount, startTestPds, tempDir, type TestPds } from './harness.js'
import { StandInRelay, until } from './relay-stand-in.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** the seq of the newest event, as a relay reading the firehose from the start sees it */
async function newestSeq(pds: TestPds): Promise<number> {
  const fh = await subscribe(pds.url, 0)
  try {
    const newest = await pds.services.firehose.maxSeq()
    const frames = await fh.until((f) => seqs(f).includes(newest))
    return Math.max(...seqs(frames))
  } finally {
    fh.close()
  }
}

describe('relay health', () => {
  let relay: StandInRelay
  let pds: TestPds | undefined
  beforeAll(async () => {
    relay = await new StandInRelay().start()
  })
  afterEach(async () => {
    await pds?.stop()
    pds = undefined
  })
  afterAll(async () => {
    await relay?.stop()
  })

  it('numbers new events above PDS_SEQ_FLOOR, and keeps going from there after a restart', async () => {
    pds = await startTestPds({ PDS_SEQ_FLOOR: '5000000' })
    await newAccount(pds.url, 'floor')
    const first = await newestSeq(pds)
    expect(first).toBeGreaterThan(5_000_000)
    pds = await pds.restart()
    await newAccount(pds.url, 'floor')
    const next = await newestSeq(pds)
    // a restart does not jump again: the floor is below what the log already holds
    expect(next).toBeGreaterThan(first)
    expect(next).toBeLessThan(first + 100)
  })

  it.skipIf(dialect === 'postgres')(
    'after `pds restore` of an older backup, continues above every seq the old server handed out',
    async () => {
      const original = await startTestPds()
      const backupDir = join(tempDir('pds-seq-backup-'), 'snapshot')
      let restored: TestPds | undefined
      try {
        await newAccount(original.url, 'old')
        const backedUp = await runCli(original.env, 'backup', backupDir)
        expect(backedUp.code, backedUp.err).toBe(0)
        // the old server goes on after the backup: these seqs reached relays, the backup lacks them
        for (let i = 0; i < 3; i++) await newAccount(original.url, 'old')
        const emitted = await newestSeq(original)
        const target = tempDir()
        rmSync(target, { recursive: true })
        const r = await runCli({ ...original.env, PDS_DATA_DIRECTORY: target }, 'restore', backupDir)
        expect(r.code, r.err).toBe(0)
        restored = await startTestPds({}, { dataDir: target })
        await newAccount(restored.url, 'new')
        expect(await newestSeq(restored)).toBeGreaterThan(emitted)
      } finally {
        await restored?.stop()
        await original.stop()
        rmSync(join(backupDir, '..'), { recursive: true, force: true })
      }
    },
  )

  it('asks the relays again at restart, and after writes while no subscriber was connected, not while one is', async () => {
    relay.calls = []
    const unwatchedMs = 600
    pds = await startTestPds(
      { PDS_CRAWLERS: relay.url },
      { crawlers: { intervalMs: 600_000, checkMs: 25, backoffMs: 20, attempts: 2, unwatchedMs } },
    )
    expect(await until(() => relay.crawls.length === 1)).toBe(true)
    expect(relay.crawls[0].hostname).toBe('localhost')

    // a subscriber is connected: writes need no crawl request
    const fh = await subscribe(pds.url)
    await sleep(unwatchedMs + 200)
    await newAccount(pds.url, 'watched')
    await sleep(unwatchedMs * 2)
    expect(relay.crawls).toHaveLength(1)

    // nobody subscribed for a while, then a write: the relays are asked again
    fh.close()
    await sleep(200)
    await newAccount(pds.url, 'unwatched')
    expect(await until(() => relay.crawls.length === 2, 10_000)).toBe(true)
    // and only once for it
    await sleep(unwatchedMs * 2)
    expect(relay.crawls).toHaveLength(2)

    pds = await pds.restart()
    expect(await until(() => relay.crawls.length === 3)).toBe(true)
  })

  it("`pds doctor` reports each relay's view of this host and says what to do", async () => {
    pds = await startTestPds()
    await newAccount(pds.url, 'doctor')
    const ours = await pds.services.firehose.maxSeq()
    const env = { ...pds.env, PDS_CRAWLERS: relay.url }
    const view = async (status: number, body: unknown) => {
      relay.hostStatus = { status, body }
      const r = await runCli(env, 'doctor', '--json')
      const checks = JSON.parse(r.out) as { check: string; level: string; detail: string }[]
      return checks.find((c) => c.check === 'relay-view')!
    }
    expect(await view(200, { hostname: 'localhost', seq: ours, status: 'active' })).toMatchObject({
      level: 'ok',
      detail: expect.stringContaining(`read up to seq ${ours}`),
    })
    // a reinstall on the same hostname: the relay's cursor is ahead of this server's log
    const ahead = await view(200, { hostname: 'localhost', seq: ours + 1000, status: 'active' })
    expect(ahead.level).toBe('warn')
    expect(ahead.detail).toContain(`PDS_SEQ_FLOOR=${ours + 1000}`)
    const unknown = await view(400, { error: 'HostNotFound', message: 'unknown host' })
    expect(unknown.level).toBe('warn')
    expect(unknown.detail).toContain('requestCrawl')
    expect((await view(200, { hostname: 'localhost', seq: ours, status: 'offline' })).detail).toContain('WebSocket')
    expect((await view(200, { hostname: 'localhost', seq: ours, status: 'idle' })).detail).toContain('crawl')
    expect((await view(200, { hostname: 'localhost', status: 'banned' })).level).toBe('fail')
  }, 180_000)
})
