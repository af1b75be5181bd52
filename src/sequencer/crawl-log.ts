// When each relay was last asked to crawl, and how it answered: a small file in the data
// directory that the server and `pds request-crawl` write and `pds status` reads.
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export type CrawlLog = Record<string, { at: string; ok: boolean }>

const file = (dataDir: string) => join(dataDir, 'crawlers.json')

export function readCrawlLog(dataDir: string): CrawlLog {
  try {
    return JSON.parse(readFileSync(file(dataDir), 'utf8')) as CrawlLog
  } catch {
    return {}
  }
}

/** best effort: a log that cannot be written never stops a crawl request */
export function recordCrawl(dataDir: string, relay: string, ok: boolean) {
  try {
    const log = readCrawlLog(dataDir)
    log[relay] = { at: new Date().toISOString(), ok }
    const tmp = `${file(dataDir)}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(log, null, 2) + '\n')
    renameSync(tmp, file(dataDir))
  } catch {}
}
