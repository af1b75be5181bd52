// `pds status` and `pds request-crawl`: what an operator checks first, read from the store and the
// data directory.
import { readFileSync, readdirSync, statSync, statfsSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { request } from '../outbound.js'
import { readCrawlLog, recordCrawl } from '../sequencer/crawl-log.js'
import { storedBlobBytes } from '../blob/blobstore-gc.js'
import { output, UsageError } from './args.js'
import { describeStore } from './store.js'
import type { Command } from './accounts.js'

export const version: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version

/** bytes under `dir` (0 when it does not exist) */
export function dirBytes(dir: string): number {
  if (!existsSync(dir)) return 0
  let total = 0
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) total += statSync(join(e.parentPath, e.name)).size
  }
  return total
}

export function freeBytes(dir: string): number | undefined {
  try {
    const s = statfsSync(existsSync(dir) ? dir : '/')
    return s.bavail * s.bsize
  } catch {
    return undefined
  }
}

export const statusCommand: Command = {
  usage: 'status   version, accounts, repositories, disk, last firehose event, relays last asked',
  async run({ config, db }, p) {
    const crawled = readCrawlLog(config.dataDir)
    const byStatus = await db
      .selectFrom('account')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy('status')
      .execute()
    const repos = await db
      .selectFrom('repo_root')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirst()
    const last = await db.selectFrom('event').select(['seq', 'sequenced_at']).orderBy('seq', 'desc').limit(1).executeTakeFirst()
    const file = config.db.kind === 'sqlite' ? config.db.file : undefined
    const dbBytes = file && ['', '-wal'].reduce((n, s) => n + (existsSync(file + s) ? statSync(file + s).size : 0), 0)
    output(p.json, {
      version,
      publicUrl: config.publicUrl,
      database: config.db.kind,
      store: describeStore(config.db, config.dataDir),
      dataDirectory: config.dataDir,
      accounts: Object.fromEntries(byStatus.map((r) => [r.status, Number(r.n)])),
      repos: Number(repos?.n ?? 0),
      databaseBytes: dbBytes,
      // S3 blobs are not on this disk: count what the blob rows say the bucket holds
      blobBytes: config.blobS3 ? await storedBlobBytes(db) : dirBytes(config.blobDir),
      freeBytes: freeBytes(config.dataDir),
      lastSeq: last ? Number(last.seq) : null,
      lastEventAt: last?.sequenced_at ?? null,
      relays: Object.fromEntries(
        [...new Set([...config.crawlers, ...Object.keys(crawled)])].map((r) => [
          r,
          crawled[r] ? `${crawled[r].ok ? 'ok' : 'failed'} ${crawled[r].at}` : 'never asked',
        ]),
      ),
    })
    return 0
  },
}

export const requestCrawlCommand: Command = {
  usage: 'request-crawl [relay-url]...   asks the relays (default PDS_CRAWLERS) to crawl this server now',
  async run({ config }, p) {
    const relays = p.positionals.length ? p.positionals : config.crawlers
    if (!relays.length) throw new UsageError('request-crawl needs a relay URL (or PDS_CRAWLERS)')
    const results = await Promise.all(relays.map((relay) => askRelay(relay, config.hostname)))
    for (const r of results) recordCrawl(config.dataDir, r.relay, r.ok)
    if (p.json) output(true, results)
    else for (const r of results) process.stdout.write(`${r.ok ? 'ok  ' : 'fail'}  ${r.relay}  ${r.detail}\n`)
    return results.every((r) => r.ok) ? 0 : 1
  },
}

async function askRelay(relay: string, hostname: string) {
  const url = `${relay.replace(/\/+$/, '')}/xrpc/com.atproto.sync.requestCrawl`
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ hostname }),
      signal: AbortSignal.timeout(10_000),
    })
    const text = (await res.body.text()).slice(0, 200)
    return { relay, ok: res.statusCode < 300, detail: res.statusCode < 300 ? `${res.statusCode}` : `${res.statusCode} ${text}` }
  } catch (err) {
    return { relay, ok: false, detail: (err as Error).message }
  }
}
