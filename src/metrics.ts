// Prometheus metrics, served on /metrics only when PDS_METRICS=true (or on PDS_METRICS_PORT).
// Request counts and latency by method and status, firehose consumers and backlog, the database
// pool or the SQLite WAL fsyncs, and counters other modules bump (email send failures) or gauges they register (replay
// store size) through `metrics.gauge(...)`. prom-client is loaded only when metrics are on.
import type { NextFunction, Request, Response } from 'express'
import type * as Prom from 'prom-client'

/** what modules bump: a prom-client counter, or a no-op while metrics are off */
export type Counter<L extends string = never> = [L] extends [never] ? { inc(): void } : { inc(labels: Partial<Record<L, string>>): void }

const NOT_COUNTED = { inc() {} }

export async function createMetrics(enabled: boolean): Promise<Metrics> {
  return new Metrics(enabled ? await import('prom-client') : undefined)
}

export class Metrics {
  readonly enabled: boolean
  private readonly registry: Prom.Registry | undefined
  private readonly latency: Prom.Histogram<'method'> | undefined
  private readonly requests: Prom.Counter<'method' | 'status'> | undefined
  readonly emailFailures: Counter = NOT_COUNTED
  readonly crawlRequests: Counter<'outcome'> = NOT_COUNTED
  readonly proxied: Counter<'status'> = NOT_COUNTED
  readonly walFsyncs: Counter = NOT_COUNTED

  constructor(private readonly prom?: typeof Prom) {
    this.enabled = !!prom
    if (!prom) return
    const { Counter, Histogram, Registry, collectDefaultMetrics } = prom
    const registry = (this.registry = new Registry())
    const registers = [registry]
    collectDefaultMetrics({ register: registry, prefix: 'pds_process_' })
    this.requests = new Counter({
      name: 'pds_xrpc_requests_total',
      help: 'XRPC requests by method id and HTTP status',
      labelNames: ['method', 'status'],
      registers,
    })
    this.latency = new Histogram({
      name: 'pds_xrpc_request_duration_seconds',
      help: 'XRPC request latency by method id',
      labelNames: ['method'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    })
    this.emailFailures = new Counter({
      name: 'pds_email_send_failures_total',
      help: 'outgoing email messages the backend failed to send',
      registers,
    })
    this.crawlRequests = new Counter({
      name: 'pds_crawl_requests_total',
      help: 'requestCrawl calls to relays by outcome',
      labelNames: ['outcome'],
      registers,
    })
    this.proxied = new Counter({
      name: 'pds_proxied_requests_total',
      help: 'requests forwarded to other services by upstream status',
      labelNames: ['status'],
      registers,
    })
    this.walFsyncs = new Counter({
      name: 'pds_db_wal_fsyncs_total',
      help: 'SQLite only: fsyncs of the write-ahead log; commits that land while one runs share the next',
      registers,
    })
  }

  /** a gauge read at scrape time (firehose consumers, pool sizes, replay-store size, ...) */
  gauge(name: string, help: string, read: () => number | Promise<number>) {
    if (!this.prom || !this.registry) return
    new this.prom.Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await read())
      },
    })
  }

  /** counts and times every /xrpc/<method> request; unknown method ids share one label */
  middleware(known: (nsid: string) => boolean) {
    return (req: Request, res: Response, next: NextFunction) => {
      const { latency, requests } = this
      if (!latency || !requests || !req.path.startsWith('/xrpc/')) return next()
      const nsid = req.path.slice('/xrpc/'.length)
      // a label per arbitrary path would let any client grow the registry without bound
      const method =
        known(nsid) || nsid === '_health' ? nsid : req.headers['atproto-proxy'] || /^(app|chat)\.bsky\./.test(nsid) ? 'proxied' : 'other'
      const end = latency.startTimer({ method })
      res.on('finish', () => {
        end()
        requests.inc({ method, status: String(res.statusCode) })
      })
      next()
    }
  }

  async render(): Promise<{ contentType: string; body: string }> {
    if (!this.registry) return { contentType: 'text/plain; version=0.0.4', body: '' }
    return { contentType: this.registry.contentType, body: await this.registry.metrics() }
  }
}
