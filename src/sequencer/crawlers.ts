// PDS_CRAWLERS: asks each relay to crawl this server (com.atproto.sync.requestCrawl) at start,
// again on the first write after a quiet period (PDS_CRAWL_INTERVAL_MINUTES), and sooner on the
// first write once no firehose subscriber has been connected for a while (a relay that indexes
// this server holds a subscription; none means it dropped the server), so a relay picks it up
// again. Each request is retried a bounded number of times
// with exponential backoff; every outcome is logged.
import { request } from '../outbound.js'
import type { Logger } from '../logger.js'
import type { Metrics } from '../metrics.js'
import type { Firehose } from './firehose.js'

export type CrawlerOptions = {
  /** quiet period after a request, before a write triggers the next (ms) */
  intervalMs: number
  /** how often the event log is looked at once the quiet period is over (ms) */
  checkMs: number
  /** with no firehose subscriber for this long, a write asks again even within the quiet period (ms) */
  unwatchedMs: number
  /** attempts per relay per notification */
  attempts: number
  /** first backoff (ms); doubles after each failure */
  backoffMs: number
  timeoutMs: number
  /** told each relay's final outcome (`pds status` shows when relays were last asked) */
  onOutcome?: (relay: string, ok: boolean) => void
}

export class Crawlers {
  private lastNotified = 0
  /** when a firehose subscriber was last seen connected (ms) */
  private lastWatched = Date.now()
  /** the log's newest seq once no subscriber was connected; a higher one went unread */
  private unwatchedSeq: number | undefined
  /** the log's newest seq when the quiet period ended; a higher seq is the awaited write */
  private idleSeq: number | undefined
  private timer: NodeJS.Timeout | undefined
  private abort = new AbortController()
  private inflight = new Set<Promise<void>>()

  constructor(
    private relays: string[],
    private hostname: string,
    private firehose: Pick<Firehose, 'maxSeq' | 'stats'>,
    private logger: Logger,
    private metrics: Metrics,
    private opts: CrawlerOptions,
  ) {}

  start() {
    if (!this.relays.length) return
    this.notifyAll()
    this.timer = setInterval(() => {
      this.check().catch((err) => this.logger.warn({ err: String(err) }, 'crawl check failed'))
    }, this.opts.checkMs)
    this.timer.unref()
  }

  async stop() {
    clearInterval(this.timer)
    this.abort.abort()
    await Promise.allSettled([...this.inflight])
  }

  private async check() {
    const now = Date.now()
    if (this.firehose.stats().consumers > 0) {
      this.lastWatched = now
      this.unwatchedSeq = undefined
    } else {
      // the log as the last subscriber left it (or as this process found it): later events went unread
      this.unwatchedSeq ??= await this.firehose.maxSeq()
      if (now - this.lastWatched >= this.opts.unwatchedMs && now - this.lastNotified >= this.opts.unwatchedMs) {
        if ((await this.firehose.maxSeq()) > this.unwatchedSeq) return this.notifyAll()
      }
    }
    if (now - this.lastNotified < this.opts.intervalMs) return
    const seq = await this.firehose.maxSeq()
    if (this.idleSeq === undefined) {
      this.idleSeq = seq
      return
    }
    if (seq > this.idleSeq) this.notifyAll()
  }

  private notifyAll() {
    this.lastNotified = Date.now()
    this.idleSeq = undefined
    this.unwatchedSeq = undefined
    for (const relay of this.relays) {
      const p = this.requestCrawl(relay).finally(() => this.inflight.delete(p))
      this.inflight.add(p)
    }
  }

  private async requestCrawl(relay: string) {
    const url = `${relay.replace(/\/+$/, '')}/xrpc/com.atproto.sync.requestCrawl`
    let wait = this.opts.backoffMs
    for (let attempt = 1; attempt <= this.opts.attempts; attempt++) {
      if (this.abort.signal.aborted) return
      let retry = true
      try {
        const res = await request(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ hostname: this.hostname }),
          headersTimeout: this.opts.timeoutMs,
          bodyTimeout: this.opts.timeoutMs,
          signal: this.abort.signal,
        })
        const text = (await res.body.text()).slice(0, 200)
        if (res.statusCode >= 200 && res.statusCode < 300) {
          this.metrics.crawlRequests.inc({ outcome: 'ok' })
          this.logger.info({ relay, attempt }, 'requested crawl')
          this.opts.onOutcome?.(relay, true)
          return
        }
        // a relay that refuses the request outright will refuse it again
        retry = res.statusCode >= 500 || res.statusCode === 429
        this.logger.warn({ relay, attempt, status: res.statusCode, body: text }, 'relay refused requestCrawl')
      } catch (err) {
        if (this.abort.signal.aborted) return
        this.logger.warn({ relay, attempt, err: String(err) }, 'requestCrawl failed')
      }
      if (!retry || attempt === this.opts.attempts) break
      await sleep(wait, this.abort.signal)
      wait *= 2
    }
    this.metrics.crawlRequests.inc({ outcome: 'failed' })
    this.opts.onOutcome?.(relay, false)
    this.logger.error({ relay }, 'gave up asking relay to crawl; will ask again after the next write')
    // let the next write try again instead of waiting out a whole quiet period
    this.lastNotified = 0
  }
}

function sleep(ms: number, signal: AbortSignal) {
  return new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms)
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t)
        resolve()
      },
      { once: true },
    )
  })
}
