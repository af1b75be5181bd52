// Cross-process wake-up for the firehose on PostgreSQL. Every transaction that appends an event
// also runs `pg_notify('pds_event', current_schema())`; PostgreSQL delivers the notification only
// when (and if) that transaction commits. Each process keeps one dedicated connection LISTENing on
// the channel and wakes its poller on a notification for its own schema. The notification carries
// no data: the `event` table stays the source of truth, so a lost or coalesced notification costs
// latency (the fallback poll picks the rows up), never an event.
import type pg from 'pg'
import type { Logger } from '../logger.js'
import { WAKEUP_BACKOFF } from '../limits.js'

export const EVENT_CHANNEL = 'pds_event'

export type WakeupOptions = {
  url: string
  schema: string
  /** called on a notification for our schema, and after every (re)connect to catch up */
  onWake: () => void
  /** called whenever the connection comes up (true) or goes away (false) */
  onHealth: (healthy: boolean) => void
  logger: Logger
}

export class PgEventWakeup {
  private client: pg.Client | undefined
  private stopped = false
  private backoff = WAKEUP_BACKOFF.minMs
  private retryTimer: NodeJS.Timeout | undefined
  private connecting: Promise<void> | undefined

  constructor(private opts: WakeupOptions) {}

  /** resolves once the first connection attempt has finished (successfully or not) */
  start(): Promise<void> {
    this.connecting = this.connect()
    return this.connecting
  }

  async stop() {
    this.stopped = true
    clearTimeout(this.retryTimer)
    await this.connecting
    const c = this.client
    this.client = undefined
    if (c) await c.end().catch(() => {})
  }

  private async connect() {
    if (this.stopped) return
    // only PostgreSQL servers come here: the driver is loaded on first use (db/index.ts)
    const { default: driver } = await import('pg')
    if (this.stopped) return
    const client = new driver.Client({ connectionString: this.opts.url })
    let lost = false
    const onLost = (err?: Error) => {
      if (lost) return
      lost = true
      if (this.client === client) this.client = undefined
      this.opts.onHealth(false)
      if (this.stopped) return
      this.opts.logger.warn({ err: err ? String(err) : undefined }, 'firehose wake-up connection lost; polling until it is back')
      client.end().catch(() => {})
      this.scheduleRetry()
    }
    // an error on this connection must never crash the process
    client.on('error', onLost)
    client.on('end', () => onLost())
    client.on('notification', (msg) => {
      if (msg.channel === EVENT_CHANNEL && msg.payload === this.opts.schema) this.opts.onWake()
    })
    try {
      await client.connect()
      await client.query(`listen ${EVENT_CHANNEL}`)
    } catch (err) {
      onLost(err as Error)
      return
    }
    if (this.stopped) {
      await client.end().catch(() => {})
      return
    }
    this.client = client
    this.backoff = WAKEUP_BACKOFF.minMs
    this.opts.onHealth(true)
    // whatever was committed while we were not listening
    this.opts.onWake()
  }

  private scheduleRetry() {
    clearTimeout(this.retryTimer)
    const wait = this.backoff
    this.backoff = Math.min(this.backoff * 2, WAKEUP_BACKOFF.maxMs)
    this.retryTimer = setTimeout(() => {
      this.connecting = this.connect()
    }, wait)
    this.retryTimer.unref()
  }
}
