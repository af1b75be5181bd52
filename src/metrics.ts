// Prometheus metrics, served on /metrics only when PDS_METRICS=true (or on PDS_METRICS_PORT).
// Request counts and latency by method and status, firehose consumers and backlog, the database
// pool or the SQLite WAL fsyncs, and counters other modules bump (email send failures) or gauges they register (replay
// store size) through `metrics.gauge(...)`.
import type { NextFunction, Request, Response } from 'express'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

export class Metrics {
  readonly registry = new Registry()
  readonly requests: Counter<'method' | 'status'>
  readonly latency: Histogram<'method'>
  readonly emailFailures: Counter
  readonly crawlRequests: Counter<'outcome'>
  readonly proxied: Counter<'status'>
  readonly walFsyncs: Counter

  constructor(readonly enabled: boolean) {
    const registers = [this.registry]
    if (enabled) collectDefaultMetrics({ register: this.registry, prefix: 'pds_process_' })
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
    new Gauge({
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
      if (!this.enabled || !req.path.startsWith('/xrpc/')) return next()
      const nsid = req.path.slice('/xrpc/'.length)
      // a label per arbitrary path would let any client grow the registry without bound
      const method = known(nsid) || nsid === '_health' ? nsid : req.headers['atproto-proxy'] || /^(app|chat)\.bsky\./.test(nsid) ? 'proxied' : 'other'
      const end = this.latency.startTimer({ method })
      res.on('finish', () => {
        end()
        this.requests.inc({ method, status: String(res.statusCode) })
      })
      next()
    }
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() }
  }
}
